// Package relay is the edge tier's vote path. An edge (--role edge) holds
// viewers' sockets and takes their votes, quiz answers and session
// requests; it does not ledger them. It gathers them into batches (a few
// milliseconds, up to a few hundred requests: Edge.Run) and sends each
// batch as one NATS request: to the full node its first request's key
// ranks first (NodeSubject), then the next, then the cluster's relay
// subject, where every ready full node is in one queue group, so NATS
// hands the batch to one full node of the edge's region, or of another
// region when this one has none. Every full node says every
// PresenceEvery whether it is ready (presence.go); an edge relays only
// to those it heard ready within a second, its region's first, so one
// that froze, died or is catching up is left within a second, and one
// that is back is relayed to again (Edge.Targets says which; the node
// moves the edge's NATS link when every full node falls silent at once).
// The full node (Server) answers every request as if
// its client had asked it directly — the same pipeline, the same statuses
// and error codes, the vote ids of its own replica — once the ledger
// batch holding the votes is synced, and the edge gives each client its
// answer. A batch unanswered in time is sent again with the same requests
// (the same idempotency keys: nothing counts twice); with no full node
// answering within the deadline the clients get 503 unavailable with
// Retry-After.
//
// What a full node decides from travels with each request (api.Sender):
// the client's address after the edge applied --trusted-proxies, its user
// agent, its voter token, the socket's age and round trip, and for a quiz
// answer when the edge read it and when it showed the question, both on
// the edge's clock. A full node believes them because the message is
// sealed with the cluster's keyring (and NATS itself admits members
// only); a message that does not open or decode is dropped unanswered.
//
// A full node's answer is one typed value (Answer: a refusal, a vote
// response with each vote's receipt, a session response, a join's check
// or a proof) from its pipeline to the edge, binary on the wire
// (answer.go); only the edge writes it as the client's JSON. A voter's
// proof (GET /v1/polls/{poll}/proofs/{leaf}) is relayed too (proof.go).
// The message formats (message.go, answer.go) are bounded in every field
// and fuzzed.
// It imports api, ids, internal/wire and receipt of this module, and NATS.
package relay
