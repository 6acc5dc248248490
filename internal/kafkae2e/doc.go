// Package kafkae2e holds the Kafka end-to-end tests: the real dlqctl
// command against a real Kafka broker, in a test package of their own so
// that only one Java server runs per test binary.
package kafkae2e
