package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"tally/api"
	"tally/client"
)

// recorder keeps the bodies of the vote requests a client sends.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		r.mu.Lock()
		r.bodies = append(r.bodies, string(b))
		r.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[len(r.bodies)-1]
}

// later reports whether stamp a is after stamp b.
func later(a, b string) bool { return a != b && api.LaterStamp(a, b) == a }

// TestVoteSendsTheNewestStamp: every answer carries its stamp; the
// client sends the voter's newest as the next vote's "after" (never an
// older one a duplicate answers with), and the node stamps that vote
// after it; a stamp too far ahead is refused (stamp_ahead) and dropped.
func TestVoteSendsTheNewestStamp(t *testing.T) {
	base := startNode(t, nil)
	rec := &recorder{}
	host, _ := clients(t, base)
	voter, err := client.New(base, client.Options{HTTPClient: &http.Client{Transport: rec, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := host.CreatePoll(ctx, spec("p")); err != nil {
		t.Fatal(err)
	}
	first, err := voter.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "ann", Idem: "k1"})
	if err != nil || first[0].Stamp == "" {
		t.Fatalf("first vote: %+v %v", first, err)
	}
	if want := `{"option":"red","voter":"ann","idem":"k1"}`; rec.last() != want {
		t.Fatalf("the first vote sent %s, want %s", rec.last(), want)
	}
	second, err := voter.Vote(ctx, "p", "", api.Vote{Option: "blue", Voter: "ann", Idem: "k2"})
	if err != nil || !later(second[0].Stamp, first[0].Stamp) {
		t.Fatalf("second vote: %+v %v (first stamped %s)", second, err, first[0].Stamp)
	}
	if want := fmt.Sprintf(`{"option":"blue","voter":"ann","idem":"k2","after":%q}`, first[0].Stamp); rec.last() != want {
		t.Fatalf("the change of mind sent %s, want %s", rec.last(), want)
	}
	// A retry of the first key answers its first stamp, which is older:
	// the client keeps the newer.
	again, err := voter.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "ann", Idem: "k1"})
	if err != nil || again[0].Status != api.StatusDuplicate || again[0].Stamp != first[0].Stamp {
		t.Fatalf("retry: %+v %v", again, err)
	}
	// Another voter's vote carries none of ann's; ann's next carries her newest.
	if _, err := voter.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "bob", Idem: "k3"}, api.Vote{Option: "red", Voter: "ann", Idem: "k4"}); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"votes":[{"option":"red","voter":"bob","idem":"k3"},{"option":"red","voter":"ann","idem":"k4","after":%q}]}`, second[0].Stamp); rec.last() != want {
		t.Fatalf("the batch sent %s, want %s", rec.last(), want)
	}
	if tot, err := voter.Poll(ctx, "p"); err != nil || tot.Totals["red"] != 2 || tot.Totals["blue"] != 0 {
		t.Fatalf("totals %+v %v", tot.Totals, err)
	}

	// A stamp an hour ahead: refused, nothing taken, and not sent again.
	ahead := api.FormatStamp(time.Now().Add(time.Hour).UnixMilli(), 0)
	_, err = voter.Vote(ctx, "p", "", api.Vote{Option: "blue", Voter: "cy", Idem: "k5", After: ahead})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != api.CodeStampAhead {
		t.Fatalf("a stamp an hour ahead: %v", err)
	}
	if r, err := voter.Vote(ctx, "p", "", api.Vote{Option: "blue", Voter: "cy", Idem: "k5"}); err != nil || r[0].Status != api.StatusAccepted {
		t.Fatalf("the same vote without it: %+v %v", r, err)
	}
}

// edge is a proxy in front of a real node that, like an edge whose full
// node took a batch but did not answer in time, passes the first unknown
// vote requests on and answers them 504 outcome_unknown (Retry-After: 1).
type edge struct {
	mu          sync.Mutex
	unknown     int      // how many more to answer 504
	unavailable int      // then how many more to answer 503, relaying nothing
	requests    []string // the bodies, as they came
}

func (e *edge) serve(t *testing.T, node string) string {
	u, err := url.Parse(node)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		e.mu.Lock()
		e.requests = append(e.requests, string(b))
		lost := e.unknown > 0
		e.unknown--
		down := !lost && e.unavailable > 0
		if down {
			e.unavailable--
		}
		e.mu.Unlock()
		if down {
			w.Header().Set("Retry-After", "1")
			api.WriteError(w, r, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "no full node answered"))
			return
		}
		if !lost {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r) // the node takes it; its answer is lost
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, r, api.Errorf(http.StatusGatewayTimeout, api.CodeOutcomeUnknown, "no answer from the full node in time: send the same request again"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestVoteResolvesAnUnknownOutcome: a vote answered 504 outcome_unknown
// (ledgered, as it happens) is sent again with the same key and body
// after Retry-After, and its definitive answer is the first record's:
// "duplicate", counted once. An outcome that stays unknown is said so
// once Options.UnknownWait has passed.
func TestVoteResolvesAnUnknownOutcome(t *testing.T) {
	base := startNode(t, nil)
	host, _ := clients(t, base)
	ctx := context.Background()
	if _, err := host.CreatePoll(ctx, spec("p")); err != nil {
		t.Fatal(err)
	}
	e := &edge{unknown: 1}
	c, err := client.New(e.serve(t, base), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := c.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "ann", Idem: "u1"})
	if err != nil || res[0].Status != api.StatusDuplicate || res[0].VoteID == "" {
		t.Fatalf("the vote after an unknown outcome: %+v %v", res, err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("sent again after %v, before Retry-After", took)
	}
	if len(e.requests) != 2 || e.requests[0] != e.requests[1] {
		t.Fatalf("requests %q: want the same body twice", e.requests)
	}
	if p, err := c.Poll(ctx, "p"); err != nil || p.Total == nil || *p.Total != 1 {
		t.Fatalf("total %+v %v", p, err)
	}

	// Never a definitive answer: ErrOutcomeUnknown after UnknownWait.
	e.mu.Lock()
	e.unknown, e.requests = 1000, nil
	e.mu.Unlock()
	short, err := client.New(c.URL(), client.Options{UnknownWait: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = short.Vote(ctx, "p", "", api.Vote{Option: "blue", Voter: "bob", Idem: "u2"})
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("an outcome that stays unknown: %v", err)
	}
	if len(e.requests) != 2 || e.requests[0] != e.requests[1] {
		t.Fatalf("requests %q: want the same body twice within 1.5 s", e.requests)
	}
}

// After an unknown outcome a 503 is not definitive either (the node that
// answers it may not know yet what another did with the first request):
// the Go client waits it out as the JavaScript client does, and an
// outcome still not known at UnknownWait is ErrOutcomeUnknown, not a
// refusal (issue 59).
func TestVoteWaitsOutA503AfterAnUnknownOutcome(t *testing.T) {
	base := startNode(t, nil)
	host, _ := clients(t, base)
	ctx := context.Background()
	if _, err := host.CreatePoll(ctx, spec("p")); err != nil {
		t.Fatal(err)
	}
	e := &edge{unknown: 1, unavailable: 1}
	c, err := client.New(e.serve(t, base), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "ann", Idem: "u1"})
	if err != nil || res[0].Status != api.StatusDuplicate {
		t.Fatalf("504, then 503, then the answer: %+v %v", res, err)
	}
	if len(e.requests) != 3 {
		t.Fatalf("%d requests, want 3 (504, 503, the answer)", len(e.requests))
	}
	e.mu.Lock()
	e.unknown, e.unavailable, e.requests = 1, 1000, nil
	e.mu.Unlock()
	short, err := client.New(c.URL(), client.Options{UnknownWait: 2500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = short.Vote(ctx, "p", "", api.Vote{Option: "blue", Voter: "bob", Idem: "u2"})
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("a 503 that lasts after an unknown outcome: %v, want ErrOutcomeUnknown", err)
	}
	// A 503 with no unknown outcome before it is a refusal, as always.
	e.mu.Lock()
	e.unknown, e.unavailable = 0, 1
	e.mu.Unlock()
	if _, err := c.Vote(ctx, "p", "", api.Vote{Option: "blue", Voter: "cy", Idem: "u3"}); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("a first answer 503: %v, want ErrUnavailable", err)
	}
}
