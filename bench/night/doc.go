// Command night runs the broadcast night end to end on one machine: three
// regions as separate node processes (an authenticated cluster with
// embedded NATS, voter tokens required, the trust score on), voters that
// behave like the page, WebSocket viewers in every region for the whole
// run, then close, grace and certification. It prints one table: votes by
// status, acknowledgement latency by phase, vote-to-viewer latency across
// regions, frames missed, time to certified at every region, the certified
// total against the acknowledgements (any difference fails the run), and
// CPU seconds and peak RSS per process.
//
// The load is shaped like a broadcast: silence while viewers connect, a
// ramp to the peak in 5 s, a burst at the peak, a long tail. Each voter
// has a home region (a few percent of requests cross to another), sends
// its taps as the page does (a request per 400 ms, a change of mind a
// second or more after its previous vote), and 2% of requests are retried
// with the same idempotency key, a third of them at another region. The
// schedule is open: requests go out at the planned rate whatever the
// answers; when the machine cannot keep up, the run takes longer and the
// table says so.
//
// Voter tokens are minted with the cluster's session secret (the same
// session.Signer the nodes use), bound to each voter's address and user
// agent, and carried in the Tally-Session header; the addresses are
// spread with X-Forwarded-For from a trusted local proxy range, four
// voters an address, as phones behind home routers. Minting instead of
// POST /v1/session keeps a million token requests out of the 30 s; the
// token path is measured in BENCHMARKS.md's session rows.
//
// With --edges N each region also runs N edges (--role edge) and every
// viewer is on an edge; each viewer's socket also carries the votes of
// the voters behind its address, as the page sends them (sockets.go), and
// the table ends with what the fleet model (tally fleet plan's formulas)
// predicts for the same processes at the same load (model.go).
//
//	go run ./bench/night --small           # 100,000 votes, 2,000 viewers
//	go run ./bench/night                   # 1,000,000 votes, 15,000 viewers
//	go run ./bench/night --edges 2         # the same through two edges a region
package main
