package buddy

import "tally/internal/rendezvous"

// Member is a full node as Rank sees it.
type Member struct{ Replica, Region string }

// Rank orders the live full nodes other than replica as its buddies:
// its own region's first, then the other regions', each by rendezvous
// hashing of the replica's id, so every node computes the same order
// and a buddy that leaves moves only its own primaries. The first is the
// buddy; the next take over while it does not answer. Empty: no other
// full node. (The other regions are ranked by the hash, not by
// distance: the cluster does not measure it.)
func Rank(replica, region string, full []Member) []string {
	var same, other []string
	for _, m := range full {
		switch {
		case m.Replica == replica || m.Replica == "":
		case m.Region == region:
			same = append(same, m.Replica)
		default:
			other = append(other, m.Replica)
		}
	}
	return append(rendezvous.Rank(replica, same), rendezvous.Rank(replica, other)...)
}
