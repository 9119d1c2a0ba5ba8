// Package hlc implements a hybrid logical clock: timestamps that follow
// physical time in milliseconds but never go backwards, with a logical
// counter to order events within one millisecond and a replica id to break
// the remaining ties, so every event in the cluster has a total order.
//
// A Clock is safe for concurrent use. It can persist a high-water mark
// through a Store so that a restarted process resumes above every timestamp
// it handed out before the restart, even if the wall clock stepped back.
// Remote timestamps too far ahead of local wall time are refused with
// ErrSkew and counted, never adopted.
//
// The package imports nothing of this module.
package hlc
