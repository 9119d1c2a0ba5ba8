package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tally/api"
	"tally/client"
	"tally/gossip/gossiptest"
	"tally/internal/testwait"
	"tally/node"
	"tally/poll"
	"tally/quiz"
)

// TestMain fails the package's tests when any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ptr[T any](v T) *T { return &v }

func spec(id string) poll.Spec {
	return poll.Spec{ID: id, Question: "Best colour?", Options: []poll.Option{{ID: "red", Label: "Red"}, {ID: "blue", Label: "Blue"}},
		DurationS: ptr(600.0), GraceS: ptr(0.0)}
}

func clients(t *testing.T, base string) (host, viewer *client.Client) {
	t.Helper()
	host, err := client.New(base, client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	viewer, err = client.New(base, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return host, viewer
}

func TestNewRefusesWhatIsNotANodeURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://x?y=1", "http://x#f", "ws://x", "http://[::1"} {
		if _, err := client.New(u, client.Options{}); !errors.Is(err, client.ErrConfig) {
			t.Errorf("New(%q): %v, want ErrConfig", u, err)
		}
	}
	c, err := client.New("https://tally.example.com/", client.Options{})
	if err != nil || c.URL() != "https://tally.example.com" {
		t.Fatalf("New: %v %v", c, err)
	}
}

// TestAPollFromCreationToCertificate: the host's and a viewer's calls,
// each answered as docs/api.md says, retries counting once.
func TestAPollFromCreationToCertificate(t *testing.T) {
	base := startNode(t, nil)
	host, viewer := clients(t, base)
	ctx := context.Background()

	if _, err := viewer.CreatePoll(ctx, spec("p")); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a viewer created a poll: %v", err)
	}
	v, err := host.CreatePoll(ctx, spec("p"))
	if err != nil || v.ID != "p" || v.Status != poll.Open {
		t.Fatalf("CreatePoll: %+v %v", v, err)
	}
	_, err = host.CreatePoll(ctx, spec("p"))
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != api.CodeInvalidRequest || !errors.Is(err, client.ErrConflict) {
		t.Fatalf("a second create: %v", err)
	}

	first, err := viewer.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "ann", Idem: "k1"})
	if err != nil || first[0].Status != api.StatusAccepted || first[0].VoteID == "" {
		t.Fatalf("Vote: %+v %v", first, err)
	}
	again, err := viewer.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "ann", Idem: "k1"})
	if err != nil || again[0].Status != api.StatusDuplicate || again[0].VoteID != first[0].VoteID {
		t.Fatalf("retry: %+v %v, want duplicate of %s", again, err, first[0].VoteID)
	}
	batch, err := viewer.Vote(ctx, "p", "", api.Vote{Option: "blue", Voter: "ann", Idem: "k2"}, api.Vote{Option: "blue", Voter: "bob", Idem: "k3"})
	if err != nil || len(batch) != 2 || batch[0].Status != api.StatusAccepted || batch[1].Status != api.StatusAccepted {
		t.Fatalf("batch: %+v %v", batch, err)
	}
	if _, err := viewer.Vote(ctx, "p", ""); err == nil {
		t.Fatal("an empty batch was sent")
	}
	if _, err := viewer.Vote(ctx, "p", "", make([]api.Vote, api.MaxBatch+1)...); err == nil {
		t.Fatal("an oversized batch was sent")
	}
	_, err = viewer.Vote(ctx, "p", "", api.Vote{Option: "green", Voter: "cy", Idem: "k4"})
	if !errors.As(err, &e) || e.Code != api.CodeInvalidOption {
		t.Fatalf("a vote for no option: %v", err)
	}
	_, err = viewer.Vote(ctx, "nope", "", api.Vote{Option: "red", Voter: "cy", Idem: "k5"})
	if !errors.As(err, &e) || e.Code != api.CodePollNotFound || !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a vote for no poll: %v", err)
	}

	got, err := viewer.Poll(ctx, "p")
	if err != nil || got.Totals["red"] != 0 || got.Totals["blue"] != 2 || *got.Total != 2 {
		t.Fatalf("Poll: %+v %v (ann changed her mind: red 0, blue 2)", got, err)
	}
	page, err := viewer.ListPolls(ctx, client.ListOptions{Limit: 1})
	if err != nil || len(page.Polls) != 1 || page.NextCursor != "" {
		t.Fatalf("ListPolls: %+v %v", page, err)
	}
	if _, err := viewer.ListPolls(ctx, client.ListOptions{Limit: api.MaxPageSize + 1}); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Fatalf("a page over the limit: %v", err)
	}
	closesAt := got.ClosesAt + 60_000
	if ext, err := host.ExtendPoll(ctx, "p", api.ExtendRequest{ClosesAt: &closesAt}); err != nil || ext.ClosesAt != closesAt {
		t.Fatalf("ExtendPoll: %+v %v", ext, err)
	}
	if _, err := host.ClosePoll(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	var res api.ResultView
	testwait.For(t, 20*time.Second, "the certificate", func() bool {
		res, err = host.Certify(ctx, "p", api.CertifyRequest{})
		return err == nil && res.Status == "reconciled"
	})
	if res.Totals["blue"] != 2 || res.Total != 2 || res.Digest == "" {
		t.Fatalf("certified: %+v", res)
	}
	if r, err := viewer.Result(ctx, "p"); err != nil || r.Digest != res.Digest {
		t.Fatalf("Result: %+v %v", r, err)
	}
	export, err := host.Export(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for sc := bufio.NewScanner(export); sc.Scan(); {
		lines++
	}
	export.Close()
	if lines < 3 { // three records and a signed head
		t.Fatalf("export: %d lines", lines)
	}
	if _, err := viewer.Export(ctx, "p"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a viewer exported the ledger: %v", err)
	}
	all, err := viewer.AllPolls(ctx, client.ListOptions{})
	if err != nil || len(all) != 1 {
		t.Fatalf("AllPolls: %d %v", len(all), err)
	}
}

func TestSessionSolvesThePuzzle(t *testing.T) {
	base := startNode(t, func(c *node.Config) { c.RequireSession, c.PowBits = true, 8 })
	host, viewer := clients(t, base)
	ctx := context.Background()
	if _, err := host.CreatePoll(ctx, spec("p")); err != nil {
		t.Fatal(err)
	}
	_, err := viewer.Vote(ctx, "p", "", api.Vote{Option: "red", Voter: "ann", Idem: client.NewKey()})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != api.CodeSessionRequired {
		t.Fatalf("a vote without a token: %v", err)
	}
	s, err := viewer.Session(ctx)
	if err != nil || s.Status != "issued" || s.Token == "" || s.Voter == "" {
		t.Fatalf("Session: %+v %v", s, err)
	}
	res, err := viewer.Vote(ctx, "p", s.Token, api.Vote{Option: "red", Voter: "whoever", Idem: client.NewKey()})
	if err != nil || res[0].Status != api.StatusAccepted {
		t.Fatalf("a vote with the token: %+v %v", res, err)
	}
	if _, err := viewer.Vote(ctx, "p", s.Token+"x", api.Vote{Option: "red", Voter: "v", Idem: client.NewKey()}); !errors.As(err, &e) || e.Code != api.CodeSessionInvalid {
		t.Fatalf("a forged token: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := viewer.Session(cancelled); err == nil {
		t.Fatal("Session ran on a cancelled context")
	}
}

func TestAQuizStepByStep(t *testing.T) {
	base := startNode(t, nil)
	host, viewer := clients(t, base)
	ctx := context.Background()
	q := quiz.Quiz{ID: "qz", Title: "Capitals", Questions: []quiz.Question{
		{Text: "France?", Options: []quiz.Option{{ID: "paris", Label: "Paris"}, {ID: "lyon", Label: "Lyon"}}, Correct: []string{"paris"}, LimitMs: 20_000},
	}}
	if v, err := host.CreateQuiz(ctx, q); err != nil || v.Status != "ready" || v.Total != 1 {
		t.Fatalf("CreateQuiz: %+v %v", v, err)
	}
	if v, err := viewer.Quiz(ctx, "qz"); err != nil || len(v.Questions) != 0 {
		t.Fatalf("a viewer sees a question before the start: %+v %v", v, err)
	}
	if _, err := viewer.QuizStep(ctx, "qz", client.QuizStart); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a viewer started the quiz: %v", err)
	}
	v, err := host.QuizStep(ctx, "qz", client.QuizStart)
	if err != nil || v.Status != "question" {
		t.Fatalf("start: %+v %v", v, err)
	}
	res, err := viewer.Vote(ctx, v.Questions[0].Poll, "", api.Vote{Option: "paris", Voter: "ann", Idem: "a1", Name: "Ann"})
	if err != nil || res[0].Status != api.StatusAccepted || res[0].ElapsedMs == nil {
		t.Fatalf("an answer: %+v %v", res, err)
	}
	// An answer stamped in the close's own millisecond counts as late
	// (docs/quiz.md): the host closes a moment later.
	for answered := time.Now().UnixMilli(); time.Now().UnixMilli() <= answered; {
		time.Sleep(time.Millisecond)
	}
	for _, step := range []string{client.QuizClose, client.QuizReveal, client.QuizEnd} {
		if _, err := host.QuizStep(ctx, "qz", step); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	var lb api.Leaderboard
	testwait.For(t, 20*time.Second, "the leaderboard", func() bool {
		lb, err = viewer.Leaderboard(ctx, "qz", 5, "ann")
		return err == nil && lb.Final
	})
	if len(lb.Standings) != 1 || lb.You == nil || lb.You.Rank != 1 {
		t.Fatalf("leaderboard: %+v", lb)
	}
	if _, err := viewer.Leaderboard(ctx, "none", 0, ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a missing quiz's leaderboard: %v", err)
	}
}

// TestWatchFollowsTheTallyThroughADroppedConnection: the viewer sees
// every vote, comes back after its connection drops (with the tally as
// it is, not as it was), and stops at the certified result.
func TestWatchFollowsTheTallyThroughADroppedConnection(t *testing.T) {
	base := startNode(t, nil)
	host, _ := clients(t, base)
	proxy, err := gossiptest.NewProxy(strings.TrimPrefix(base, "http://"), 0) // a TCP proxy that can cut every connection
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viewer, err := client.New("http://"+proxy.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := host.CreatePoll(ctx, spec("p")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last client.Tally
	snapshots := 0
	done := make(chan error, 1)
	go func() {
		done <- viewer.Watch(ctx, "p", client.WatchOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
			OnTally: func(tl client.Tally) error {
				mu.Lock()
				defer mu.Unlock()
				last = tl
				if tl.Frame.Type == api.TypeSnapshot {
					snapshots++
				}
				return nil
			}})
	}()
	seen := func(red, blue int64) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return last.Totals["red"] == red && last.Totals["blue"] == blue && last.Total == red+blue
		}
	}
	vote := func(option, voter string) {
		t.Helper()
		if _, err := host.Vote(ctx, "p", "", api.Vote{Option: option, Voter: voter, Idem: client.NewKey()}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 10*time.Second, "the first snapshot", seen(0, 0))
	vote("red", "a")
	vote("blue", "b")
	testwait.For(t, 10*time.Second, "the votes", seen(1, 1))

	proxy.Cut()      // the viewer's socket drops, and it cannot come back yet
	vote("red", "c") // a vote while it is away
	proxy.Restore()
	testwait.For(t, 10*time.Second, "the vote cast while reconnecting", seen(2, 1))
	mu.Lock()
	if snapshots < 2 {
		t.Errorf("%d snapshots: the viewer did not reconnect", snapshots)
	}
	mu.Unlock()

	if _, err := host.ClosePoll(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := host.Certify(ctx, "p", api.CertifyRequest{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Watch did not end at the final frame")
	}
	if !last.Final || last.Digest == "" || last.Status != "reconciled" || last.Totals["red"] != 2 {
		t.Fatalf("the final tally: %+v", last)
	}
}

func TestWatchEndsOnAMissingPollAndOnItsCallersError(t *testing.T) {
	base := startNode(t, nil)
	host, viewer := clients(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noop := client.WatchOptions{OnTally: func(client.Tally) error { return nil }}
	if err := viewer.Watch(ctx, "nope", noop); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Watch of a missing poll: %v", err)
	}
	if err := viewer.Watch(ctx, "nope", client.WatchOptions{}); !errors.Is(err, client.ErrConfig) {
		t.Fatalf("Watch without OnTally: %v", err)
	}
	if _, err := host.CreatePoll(ctx, spec("p")); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	if err := viewer.Watch(ctx, "p", client.WatchOptions{OnTally: func(client.Tally) error { return stop }}); !errors.Is(err, stop) {
		t.Fatalf("Watch after OnTally's error: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := viewer.Watch(short, "p", noop); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Watch after its context ended: %v", err)
	}
}

func ExampleClient_Vote() {
	base, stop, err := runNode(nil) // a real node on a free port; yours is e.g. https://tally.example.com
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	host, _ := client.New(base, client.Options{Token: adminToken})
	host.CreatePoll(ctx, poll.Spec{ID: "colour", Question: "Best colour?",
		Options: []poll.Option{{ID: "red", Label: "Red"}, {ID: "blue", Label: "Blue"}}})

	viewer, _ := client.New(base, client.Options{})
	voter, key := client.NewKey(), client.NewKey() // keep the key: a retry sends it again
	for range 2 {
		res, err := viewer.Vote(ctx, "colour", "", api.Vote{Option: "red", Voter: voter, Idem: key})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res[0].Status)
	}
	p, _ := viewer.Poll(ctx, "colour")
	fmt.Println("red", p.Totals["red"], "blue", p.Totals["blue"])
	// Output:
	// accepted
	// duplicate
	// red 1 blue 0
}

func ExampleClient_Watch() {
	base, stop, err := runNode(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	host, _ := client.New(base, client.Options{Token: adminToken})
	host.CreatePoll(ctx, poll.Spec{ID: "colour", Question: "Best colour?",
		Options: []poll.Option{{ID: "red", Label: "Red"}, {ID: "blue", Label: "Blue"}}})

	viewer, _ := client.New(base, client.Options{})
	shown := int64(-1)
	err = viewer.Watch(ctx, "colour", client.WatchOptions{OnTally: func(t client.Tally) error {
		if t.Total != shown || t.Final { // frames also carry status and viewer changes
			fmt.Printf("%s: red %d, blue %d\n", t.Frame.Type, t.Totals["red"], t.Totals["blue"])
			shown = t.Total
		}
		switch {
		case t.Final:
			return nil // Watch returns after the certified result
		case t.Total == 0:
			host.Vote(ctx, "colour", "", api.Vote{Option: "blue", Voter: "ann", Idem: client.NewKey()})
		case t.Status == "open" && t.Total == 1:
			host.ClosePoll(ctx, "colour")
			waitForGrace(ctx, host, "colour") // the grace window (2 s by default), then certify
		}
		return nil
	}})
	fmt.Println("watch:", err)
	// Output:
	// snapshot: red 0, blue 0
	// diff: red 0, blue 1
	// final: red 0, blue 1
	// watch: <nil>
}

// waitForGrace certifies the poll once its grace window is over (in its
// own goroutine: the example's callback must not block the stream).
func waitForGrace(ctx context.Context, host *client.Client, id string) {
	go func() {
		for ctx.Err() == nil {
			if r, err := host.Certify(ctx, id, api.CertifyRequest{}); err == nil && r.Status == "reconciled" {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}
