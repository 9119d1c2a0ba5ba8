package ingest

import (
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"
)

// appendVoteResponse writes the vote response as encoding/json would (without its
// HTML escaping, which a JSON API does not need): the response is written
// on every vote, and encoding/json's reflection was 5% of a vote's CPU.
func appendVoteResponse(b []byte, v VoteResponse) []byte {
	b = append(b, `{"results":[`...)
	for i, r := range v.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"idem":`...)
		b = appendString(b, r.Idem)
		b = append(b, `,"status":`...)
		b = appendString(b, r.Status)
		if r.VoteID != "" {
			b = append(b, `,"vote_id":`...)
			b = appendString(b, r.VoteID)
		}
		if r.Error != "" {
			b = append(b, `,"error":`...)
			b = appendString(b, r.Error)
		}
		if r.ElapsedMs != nil {
			b = append(b, `,"elapsed_ms":`...)
			b = strconv.AppendInt(b, *r.ElapsedMs, 10)
		}
		b = append(b, '}')
	}
	b = append(b, `],"server_time":`...)
	b = strconv.AppendInt(b, v.ServerTime, 10)
	return append(b, "}\n"...)
}

// responseBufs are the buffers responses are built in: one per request
// in flight, not one allocation per vote.
var responseBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeVoteResponse sends the response, 200.
func writeVoteResponse(w http.ResponseWriter, v VoteResponse) {
	bp := responseBufs.Get().(*[]byte)
	b := appendVoteResponse((*bp)[:0], v)
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

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029
// escaped (as encoding/json does).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
