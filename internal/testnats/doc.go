// Package testnats runs a real NATS server on loopback for tests (Start):
// the buddy's copies and the relay are tested over it, not over a mock.
// It imports nothing of Tally's.
package testnats
