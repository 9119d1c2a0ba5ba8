package api

import (
	"encoding/json"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// The hand-written response decodes to what encoding/json would have
// written, for any strings (quotes, control characters, invalid UTF-8,
// U+2028).
func TestVoteResponseJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := rapid.OneOf(rapid.String(), rapid.StringMatching(`[\x00-\x1f"\\<>&\x{2028}\x{2029}a-z]{0,12}`),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }))
		v := VoteResponse{ServerTime: rapid.Int64().Draw(t, "time")}
		for range rapid.IntRange(0, 10).Draw(t, "results") {
			r := VoteResult{Idem: str.Draw(t, "idem"), Status: str.Draw(t, "status"), VoteID: str.Draw(t, "id"), Error: str.Draw(t, "err")}
			if rapid.Bool().Draw(t, "answer?") {
				e := rapid.Int64().Draw(t, "elapsed")
				r.ElapsedMs = &e
			}
			v.Results = append(v.Results, r)
		}
		if v.Results == nil {
			v.Results = []VoteResult{}
		}
		var got, want VoteResponse
		if err := json.Unmarshal(v.AppendJSON(nil), &got); err != nil {
			t.Fatalf("not JSON: %v: %s", err, v.AppendJSON(nil))
		}
		ref, _ := json.Marshal(v)
		json.Unmarshal(ref, &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, encoding/json gives %+v", got, want)
		}
	})
}
