// Package certify turns a closed poll's regional ledgers into one exact,
// certified result.
//
// After a poll's close plus its grace window (plus a moment for the last
// record counts to spread), one node per poll — the coordinator, first in
// a rendezvous-hash order of the full members' replica ids — collects
// every replica's records of the poll: its own from its ledger, the
// others' over HTTP (GET /v1/polls/{poll}/ledger?format=binary with the
// cluster's node-to-node credential, never the admin token). The gossiped per-replica record counts say which replicas exist
// and how many records each must hand over. A replica that is not a live
// member, an export that breaks its hash chain, or one shorter than its
// count leaves the result pending, with the reason, and the coordinator
// tries again. Complete, the records go through ledger.ReconcileWith (with
// the poll's final close) and the result is written as a certificate into
// the replicated state, which gossip carries to every region. The next
// node in the order takes over after a delay if the coordinator is gone or
// stuck; every node computes the same result from the same records.
//
// A replica whose node is gone (destroyed, never back) is read from its
// buddy's copy (fromcopy.go, ?copy_of=), and only where the copy ends at
// a chain head the replica itself signed, verified with the key it is
// known by: a copy no replica signed is refused, naming its holder, and
// the result stays pending. Gone is no longer a member, or refusing
// every connection to its HTTP port for a second (gone.go), never merely
// slow to answer: a frozen node may still answer votes "accepted". Once
// certified, every full node holds the ballots of the replicas read from
// copies (ballots.go), so a retry of their keys is a duplicate anywhere.
//
// An operator may certify without a lost replica, or with only the records
// a restored replica still holds, only explicitly (POST
// /v1/polls/{poll}/certify with "exclude" or "accept_lost"); the
// certificate records the decision, what it left out and the reason.
// Leaderboards of certified quizzes are computed here too (leaderboard.go).
//
// An attempt's bookkeeping is pure and table-tested (plan.go): plan says
// which replicas to read and which are missing before anything is read;
// judge compares what was read with what each replica was known to hold.
// The exactness metrics (exactness.go) compare the live tally with the
// certificate.
//
// It imports api, hlc, ids, internal/rendezvous, ledger, poll, quiz and
// state of this module.
package certify
