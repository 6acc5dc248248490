//go:build no_redis

package main

// redisMode is left out of this build (-tags no_redis).
func redisMode() mode { return mode{} }
