// Package api holds what every HTTP handler of Tally shares: the error
// shape of the v1 API ({"error":{"code","message"}} with a fitting status),
// strict JSON request decoding, JSON responses, and the JSON shapes of the
// poll and quiz resources (views.go), which the handlers answer with and
// clients decode. It imports poll of this module and nothing else, so
// state, ingest, fanout, certify, node and cmd/tally can all use it.
package api
