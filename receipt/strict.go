package receipt

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// encoding/json matches a field's name in any case and reads base64 with
// line breaks in it; the JavaScript client does neither. strictly checks
// a receipt's or a proof's JSON as the client reads it, so that both
// refuse the same input: each object's names exactly the fields it has,
// each byte field in canonical standard base64.

// field checks one field's JSON value; nil: any value (the struct's own
// decoding checks it).
type field func(raw json.RawMessage) error

var (
	receiptFields = map[string]field{"poll": nil, "vote_id": nil, "stamp": nil, "leaf": nil, "sig": canonical}
	headFields    = map[string]field{"poll": nil, "size": nil, "root": nil, "digest": nil, "by": nil, "sig": canonical}
	voteFields    = map[string]field{"vote_id": nil, "voter": nil, "option": nil, "stamp": nil}
	proofFields   map[string]field // set in init: it refers to itself (counted)
)

func init() {
	proofFields = map[string]field{"leaf": nil, "index": nil, "path": nil, "record": canonical, "disposition": nil,
		"vote":      object(voteFields),
		"tree_head": nullOr(object(headFields)),
		"counted":   nullOr(func(raw json.RawMessage) error { return strictly(raw, proofFields) }),
	}
}

// strictly checks that raw is an object whose names are all fields', in
// their case, and that each field's value passes its check.
func strictly(raw json.RawMessage, fields map[string]field) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: want a JSON object", ErrMalformed)
	}
	for name, value := range obj {
		check, ok := fields[name]
		if !ok {
			return fmt.Errorf("%w: unknown field %q", ErrMalformed, name)
		}
		if check != nil {
			if err := check(value); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

func object(fields map[string]field) field {
	return func(raw json.RawMessage) error { return strictly(raw, fields) }
}

func nullOr(f field) field {
	return func(raw json.RawMessage) error {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return nil
		}
		return f(raw)
	}
}

// canonical checks a byte field: a string in standard base64 as
// encoding/json writes it, or null.
func canonical(raw json.RawMessage) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("%w: want a base64 string", ErrMalformed)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return fmt.Errorf("%w: not canonical standard base64", ErrMalformed)
	}
	return nil
}
