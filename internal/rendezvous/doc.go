// Package rendezvous ranks nodes for a key by highest random weight
// (rendezvous hashing): every caller that lists the same nodes, in any
// order, gets the same ranking, and a node leaving moves only the keys it
// ranked first. The relay routes a vote's idempotency key to a full node
// with it, and certification picks a poll's coordinator and who takes over
// with it: one hash for both. It imports nothing of Tally's.
package rendezvous
