// Package api holds what every HTTP handler of Tally shares: the error
// shape of the v1 API ({"error":{"code","message"}} with a fitting status),
// strict JSON request decoding, and JSON responses. It imports nothing of
// this module, so ingest, fanout and node can all use it.
package api
