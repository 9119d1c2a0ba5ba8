// Package testwait is the one way Tally's tests wait: on a condition,
// with a deadline, never on a bare sleep (For). It imports nothing of
// Tally's.
package testwait
