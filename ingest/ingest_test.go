package ingest

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"tally/api"
	"tally/ledger"
	"tally/names"
)

func TestClientIPTrustsOnlyConfiguredProxies(t *testing.T) {
	trusted, err := ParseCIDRs("10.0.0.0/8, 192.168.1.7")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, remote, xff, want string
	}{
		{"no proxy", "203.0.113.9:5555", "", "203.0.113.9"},
		{"untrusted peer's header is ignored", "203.0.113.9:5555", "1.2.3.4", "203.0.113.9"},
		{"trusted peer", "10.1.2.3:80", "198.51.100.7", "198.51.100.7"},
		{"chain of trusted proxies", "10.1.2.3:80", "198.51.100.7, 192.168.1.7, 10.9.9.9", "198.51.100.7"},
		{"spoofed left-most entry", "10.1.2.3:80", "6.6.6.6, 198.51.100.7", "198.51.100.7"},
		{"garbage header", "10.1.2.3:80", "not-an-ip", "10.1.2.3"},
		{"all hops trusted", "10.1.2.3:80", "10.0.0.1", "10.1.2.3"},
		{"ipv6 peer", "[2001:db8::1]:443", "", "2001:db8::1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			r.RemoteAddr = c.remote
			if c.xff != "" {
				r.Header.Set("X-Forwarded-For", c.xff)
			}
			if got := ClientIP(r, trusted); got != c.want {
				t.Fatalf("clientIP = %q, want %q", got, c.want)
			}
		})
	}
	if _, err := ParseCIDRs("10.0.0.0/33"); err == nil {
		t.Fatal("bad CIDR accepted")
	}
}

func TestDecodeVotes(t *testing.T) {
	good := []string{
		`{"option":"a","voter":"v","idem":"k"}`,
		`{"votes":[{"option":"a","voter":"v","idem":"k"},{"option":"b","voter":"w","idem":"k2"}]}`,
	}
	for _, in := range good {
		if _, err := DecodeVotes([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	bad := []string{
		``, `null`, `[]`, `{"votes":null}`, `{"votes":[]}`, `{"votes":[{}]}`,
		`{"option":1,"voter":"v","idem":"k"}`, `{"option":"a","voter":"v","idem":"k"} x`,
		`{"option":"a","voter":"v","idem":"k","votes":[]}`, "{\"option\":\"a\",\"voter\":\"\xc3\x28\",\"idem\":\"k\"}",
		`{"option":"a","voter":"` + strings.Repeat("v", ledger.MaxVoterLen+1) + `","idem":"k"}`,
	}
	for _, in := range bad {
		_, err := DecodeVotes([]byte(in))
		var e *api.Error
		if !errors.As(err, &e) || e.Status != 400 {
			t.Errorf("%q: err = %v, want a 400 *api.Error", in, err)
		}
	}
}

func FuzzDecodeVotes(f *testing.F) {
	f.Add([]byte(`{"option":"a","voter":"v","idem":"k"}`))
	f.Add([]byte(`{"votes":[{"option":"a","voter":"v","idem":"k"}]}`))
	f.Add([]byte(`{"votes":[`))
	f.Add([]byte(`{"option":"a","voter":"v","idem":"k","name":"𝐀𝐧𝐧  ｌｅｅ"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		votes, err := DecodeVotes(b)
		if err != nil {
			var e *api.Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("error is not a 400 *api.Error: %v", err)
			}
			return
		}
		if len(votes) == 0 || len(votes) > MaxBatch {
			t.Fatalf("decoded %d votes", len(votes))
		}
		for _, v := range votes {
			for _, s := range []string{v.Voter, v.Idem, v.Option} {
				if ledger.ValidText(s, 128) != nil {
					t.Fatalf("accepted an invalid field %q", s)
				}
			}
			// A name comes out in its normal form, well formed.
			if v.Name != "" && (names.Normalize(v.Name) != v.Name || ledger.ValidName(v.Name) != nil) {
				t.Fatalf("accepted the name %q", v.Name)
			}
		}
	})
}
