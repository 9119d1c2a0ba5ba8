package ingest

import (
	"net/http"
	"sync"
)

// responseBufs are the buffers responses are built in: one per request
// in flight, not one allocation per vote.
var responseBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeVoteResponse sends the response, 200.
func writeVoteResponse(w http.ResponseWriter, v VoteResponse) {
	bp := responseBufs.Get().(*[]byte)
	b := v.AppendJSON((*bp)[:0])
	w.Header()["Content-Type"] = jsonContentType // net/http adds the length: the body fits its buffer
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	if cap(b) <= 64<<10 { // a huge one is not kept
		*bp = b
		responseBufs.Put(bp)
	}
}

// jsonContentType is shared by every response (net/http only reads it).
var jsonContentType = []string{"application/json"}
