package receipt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A proof or a receipt whose JSON the JavaScript client would refuse is
// refused here too: a field name in another case, an unknown field at
// any depth, base64 with a line break or without its padding, a
// `counted` that is not an object.
func TestDecodeIsAsStrictAsTheJavaScriptClient(t *testing.T) {
	f := newFixtureSetup(t)
	honest := f.poll.served(t, 0)
	raw, err := json.Marshal(honest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeProof(raw); err != nil {
		t.Fatalf("the honest proof: %v", err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(raw, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	b64 := func(m map[string]any, key string) string { return m[key].(string) }
	for name, b := range map[string][]byte{
		"a field in capitals":          edit(func(m map[string]any) { m["DISPOSITION"] = "counted" }),
		"only a field in capitals":     edit(func(m map[string]any) { m["Disposition"] = m["disposition"]; delete(m, "disposition") }),
		"an unknown field":             edit(func(m map[string]any) { m["note"] = "hi" }),
		"an unknown field in vote":     edit(func(m map[string]any) { m["vote"].(map[string]any)["x"] = 1 }),
		"an unknown field in the head": edit(func(m map[string]any) { m["tree_head"].(map[string]any)["X"] = 1 }),
		"a line break in the record":   edit(func(m map[string]any) { r := b64(m, "record"); m["record"] = r[:8] + "\n" + r[8:] }),
		"the record without padding":   edit(func(m map[string]any) { m["record"] = "QUJDRA" }), // "ABCD", whose padding is "QUJDRA=="
		"a line break in the head's sig": edit(func(m map[string]any) {
			h := m["tree_head"].(map[string]any)
			s := h["sig"].(string)
			h["sig"] = s[:4] + "\r\n" + s[4:]
		}),
		"counted false":  edit(func(m map[string]any) { m["counted"] = false }),
		"counted a list": edit(func(m map[string]any) { m["counted"] = []any{} }),
		"not an object":  []byte(`[1,2]`),
		"null":           []byte(`null`),
	} {
		if _, err := DecodeProof(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	rc, _ := json.Marshal(f.poll.receiptOf(0, f.keys[f.poll.records[0].Replica]))
	for name, b := range map[string]string{
		"a field in capitals": strings.Replace(string(rc), `"leaf"`, `"LEAF"`, 1),
		"a line break in sig": strings.Replace(string(rc), `"sig":"`, `"sig":"\n`, 1),
	} {
		if _, err := Decode([]byte(b)); !errors.Is(err, ErrMalformed) {
			t.Errorf("receipt, %s: %v", name, err)
		}
	}
}
