//go:build !unix

package testproc

// LockJavaStart is the unix lock's stand-in where flock(2) does not exist;
// the Java test servers are started only on unix machines.
func LockJavaStart() (release func(), err error) { return func() {}, nil }
