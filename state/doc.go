// Package state is a node's replicated state. State holds the per-poll
// counts itself and gives each other concern its own type, a field set by
// New:
//
//   - Defs (Definitions: definitions.go, certificate.go, keys.go,
//     forget.go, quiz.go): each poll's definition as a register whose
//     amended fields join field by field, its certificate, the replicas'
//     public keys and the tombstones of forgotten polls, all persisted in
//     the Store;
//   - per poll, on State, the counts: this replica's cells, every
//     replica's tally and ballots, and quiz show times (state.go,
//     ballots.go, look.go, shown.go). A poll's counts are made before its
//     definition is visible and dropped after it is forgotten;
//   - Audience (viewers.go): the viewers each replica serves, per poll;
//   - Names (names.go): the display names each quiz's participants took,
//     by look-alike key, so that a look-alike of another's is refused;
//   - Budget (Budgets, budget.go): the cluster-wide voter-token budgets;
//   - Replicas (replicas.go): when each replica was last heard from;
//   - Quizzes (quiz.go): the reads api.QuizOf takes.
//
// The API's views of this state (a quiz's, a poll's) are built in package
// api.
//
// This replica's own counts live in striped cells: each option has a row
// of padded atomic counters, a writer picks a stripe at random, and
// readers sum the stripes. A vote reads what it needs of its poll in one
// call before the ledger (LookVotes, look.go: its key's holder, whether it
// is a retry, the voter's latest and counted ballots, the replica's record
// counts), and applies its ballot after. On the vote path, though, every vote passes its
// poll's ballots lock first (Vote: last vote wins must see the voter's
// previous ballot to move the count), so one poll's voters are
// serialized there and the stripes only keep the cells' cache lines apart
// from the readers and from Count's direct writes. Reading a tally folds
// the cells into the poll's crdt.Tally, which also holds what other
// replicas reported (merged by gossip). Everything is safe for concurrent
// use: ingest writes, gossip merges, fan-out reads.
//
// A checkpoint (checkpoint.go) saves the vote state at one instant — per
// poll its counts, record count and every replica's ballots — so a restart
// replays only the ledger's tail: Snapshot copies it, Checkpoint.Write
// writes it, LoadCheckpoint checks a saved one whole before restoring it.
//
// It imports crdt, hlc, ids, internal/wire, ledger (the certificate type)
// and poll of this module.
package state
