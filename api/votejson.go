package api

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the vote response as encoding/json would write it (without its
// HTML escaping, which a JSON API does not need): the response is written
// on every vote, and encoding/json's reflection was 5% of a vote's CPU.
func (v VoteResponse) AppendJSON(b []byte) []byte {
	b = append(b, `{"results":[`...)
	for i, r := range v.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"idem":`...)
		b = appendJSONString(b, r.Idem)
		b = append(b, `,"status":`...)
		b = appendJSONString(b, r.Status)
		if r.VoteID != "" {
			b = append(b, `,"vote_id":`...)
			b = appendJSONString(b, r.VoteID)
		}
		if r.Error != "" {
			b = append(b, `,"error":`...)
			b = appendJSONString(b, r.Error)
		}
		if r.Stamp != "" {
			b = append(b, `,"stamp":`...)
			b = appendJSONString(b, r.Stamp)
		}
		if r.ElapsedMs != nil {
			b = append(b, `,"elapsed_ms":`...)
			b = strconv.AppendInt(b, *r.ElapsedMs, 10)
		}
		if r.Receipt != nil {
			b = append(b, `,"receipt":`...)
			b = r.Receipt.AppendJSON(b)
		}
		b = append(b, '}')
	}
	b = append(b, `],"server_time":`...)
	b = strconv.AppendInt(b, v.ServerTime, 10)
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029
// escaped (as encoding/json does).
func appendJSONString(b []byte, s string) []byte {
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

// AppendSocketAck appends the answer to a vote sent on a live socket,
// {"type":"ack","ref":…,"result":<the vote response>}: the same JSON value
// as encoding/json's SocketReply (AppendJSON's differences: no HTML
// escaping, stamp before elapsed_ms, no results as []), allocation-free
// into a reused buffer: it is written once per socket vote.
func AppendSocketAck(b []byte, ref string, v VoteResponse) []byte {
	b = append(b, `{"type":"ack"`...)
	if ref != "" {
		b = append(b, `,"ref":`...)
		b = appendJSONString(b, ref)
	}
	b = append(b, `,"result":`...)
	b = v.AppendJSON(b)
	b = b[:len(b)-1] // AppendJSON's newline
	return append(b, '}')
}
