package node

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/ingest"
	"tally/internal/testwait"
	"tally/session"
)

// getToken runs the session flow: ask, solve the puzzle, get a token.
func (tn *testNode) getToken(t *testing.T, ua string) (token, voter string, bits int) {
	t.Helper()
	r := tn.call(t, "POST", "/v1/session", "", "User-Agent", ua)
	if r.status != http.StatusOK || r.body["status"] != "challenge" {
		t.Fatalf("session: %d %s", r.status, r.raw)
	}
	ch, bits := r.body["challenge"].(string), int(r.body["bits"].(float64))
	nonce := 0
	for session.LeadingZeroBits(ch, strconv.Itoa(nonce)) < bits {
		nonce++
	}
	body, _ := json.Marshal(map[string]string{"challenge": ch, "nonce": strconv.Itoa(nonce)})
	r = tn.call(t, "POST", "/v1/session", string(body), "User-Agent", ua)
	if r.status != http.StatusOK || r.body["status"] != "issued" {
		t.Fatalf("session with solution: %d %s", r.status, r.raw)
	}
	return r.body["token"].(string), r.body["voter"].(string), bits
}

// TestVoterSessions: tokens after a puzzle, votes counted under the
// token's voter, and forged, expired, replayed-from-another-client and
// malformed tokens and wrong or reused solutions refused with clear codes,
// none of them changing the tally.
func TestVoterSessions(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.RequireSession, c.PowBits, c.TokensPerMinute = true, 6, 12 })
	tn.createPoll(t, "p")
	tok, voter, bits := tn.getToken(t, "phone")
	if bits != 6 || len(voter) != 32 {
		t.Fatalf("bits %d voter %q", bits, voter)
	}
	vote := func(token, ua, idem, option string) response {
		hs := []string{"User-Agent", ua}
		if token != "" {
			hs = append(hs, "Tally-Session", token)
		}
		return tn.call(t, "POST", "/v1/polls/p/votes", fmt.Sprintf(`{"option":%q,"voter":"whatever","idem":%q}`, option, idem), hs...)
	}
	if r := vote(tok, "phone", "i1", "a"); r.status != 200 {
		t.Fatalf("vote with token: %d %s", r.status, r.raw)
	}
	if r := vote(tok, "phone", "i2", "b"); r.status != 200 { // the same voter changes their mind
		t.Fatalf("second vote: %d %s", r.status, r.raw)
	}
	if got := tn.totals(t, "p"); got["a"] != 0 || got["b"] != 1 {
		t.Fatalf("totals %v: the token's voter counts once, last vote wins", got)
	}

	forged := tok[:len(tok)-3] + "AAA"
	cases := []struct {
		name, token, ua string
		status          int
		code            string
	}{
		{"no token", "", "phone", 401, "session_required"},
		{"garbage", "hello", "phone", 401, "session_invalid"},
		{"forged", forged, "phone", 401, "session_invalid"},
		{"another client", tok, "laptop", 401, "session_mismatch"},
	}
	for i, c := range cases {
		if r := vote(c.token, c.ua, fmt.Sprintf("x%d", i), "c"); r.status != c.status || r.code() != c.code {
			t.Errorf("%s: %d %s", c.name, r.status, r.raw)
		}
	}
	// Puzzle failures.
	r := tn.call(t, "POST", "/v1/session", "", "User-Agent", "phone")
	ch := r.body["challenge"].(string)
	wrong := 0
	for session.LeadingZeroBits(ch, strconv.Itoa(wrong)) >= int(r.body["bits"].(float64)) {
		wrong++
	}
	if r := tn.call(t, "POST", "/v1/session", fmt.Sprintf(`{"challenge":%q,"nonce":"%d"}`, ch, wrong), "User-Agent", "phone"); r.status != 403 || r.code() != "puzzle_failed" {
		t.Errorf("wrong solution: %d %s", r.status, r.raw)
	}
	for _, body := range []string{`{"challenge":"c1.x.y","nonce":"1"}`, `{"challenge":1}`, `{"nonce":"1","extra":true}`, `{`} {
		if r := tn.call(t, "POST", "/v1/session", body, "User-Agent", "phone"); r.status < 400 || r.status >= 500 || r.code() == "" {
			t.Errorf("bad session request %s: %d %s", body, r.status, r.raw)
		}
	}
	// Expired.
	tn.clock.advance(25 * time.Hour)
	if r := vote(tok, "phone", "late", "c"); r.status != 401 || r.code() != "session_expired" {
		t.Errorf("expired: %d %s", r.status, r.raw)
	}
	if got := tn.totals(t, "p"); got["_total"] != 1 {
		t.Fatalf("refused requests changed the tally: %v", got)
	}
}

// TestTokenLimitsAndRisingDifficulty: an address asking for many tokens
// gets harder puzzles, then 429s before any puzzle.
func TestTokenLimitsAndRisingDifficulty(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.PowBits, c.TokensPerMinute = 2, 10 })
	first, last := 0, 0
	for i := range 10 {
		_, _, bits := tn.getToken(t, "script")
		if i == 0 {
			first = bits
		}
		last = bits
	}
	if last <= first {
		t.Fatalf("difficulty did not rise: %d → %d", first, last)
	}
	// The 11th is refused before a puzzle is set: no work for nothing.
	r := tn.call(t, "POST", "/v1/session", "", "User-Agent", "script")
	if r.status != http.StatusTooManyRequests || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("11th token in a minute: %d %s", r.status, r.raw)
	}
}

// TestDatacenterVotesAreShadowed: a vote from a listed range is ledgered
// and acknowledged like any other and not counted, live or certified.
func TestDatacenterVotesAreShadowed(t *testing.T) {
	file := t.TempDir() + "/ranges"
	os.WriteFile(file, []byte("# test ranges\n127.0.0.0/8 # loopback stands in for a datacenter\n"), 0o600)
	tn := startNode(t, t.TempDir(), func(c *Config) { c.DatacenterFile = file })
	tn.createPoll(t, "p")
	if s, _ := tn.castVote(t, "p", "a", "bot", "bot-1"); s != "accepted" {
		t.Fatalf("acked %q, want the same answer as any vote", s)
	}
	if got := tn.totals(t, "p"); got["_total"] != 0 {
		t.Fatalf("a datacenter vote was counted: %v", got)
	}
	tn.clock.advance(2 * time.Minute)
	if v := certifiedEverywhere(t, []*testNode{tn}, "p"); v.Total != 0 || v.Detail.Result.Shadowed != 1 {
		t.Fatalf("certified: total %d, shadowed %d", v.Total, v.Detail.Result.Shadowed)
	}
	bad := t.TempDir() + "/bad"
	os.WriteFile(bad, []byte("10.0.0.0/8\nnot-a-range\n"), 0o600)
	cfg := DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr, cfg.DatacenterFile = t.TempDir(), "127.0.0.1:0", bad
	if _, err := Open(cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad ranges file: %v", err)
	}
}

// TestPublicPollsAndPollLimits: a public poll takes votes only with a token
// earned by solving the puzzle; a poll's own rate limits replace the
// node's.
func TestPublicPollsAndPollLimits(t *testing.T) {
	secret := "shared-secret-0123456789"
	tn := startNode(t, t.TempDir(), func(c *Config) { c.SessionSecret, c.PowBits = secret, 4 })
	cheap := startNode(t, t.TempDir(), func(c *Config) { c.SessionSecret, c.PowBits = secret, NoPuzzle }) // issues tokens without a puzzle
	r := tn.admin(t, "POST", "/v1/polls", `{"id":"pub","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"public":true,"limits":{"voter_rate":0.5}}`)
	if r.status != 201 || r.body["public"] != true {
		t.Fatalf("create public poll: %d %s", r.status, r.raw)
	}
	vote := func(token, idem string) response {
		hs := []string{"User-Agent", "ua"}
		if token != "" {
			hs = append(hs, "Tally-Session", token)
		}
		return tn.call(t, "POST", "/v1/polls/pub/votes", fmt.Sprintf(`{"option":"a","voter":"x","idem":%q}`, idem), hs...)
	}
	if r := vote("", "i0"); r.status != 401 || r.code() != "session_required" {
		t.Fatalf("public poll without a token: %d %s", r.status, r.raw)
	}
	r = cheap.call(t, "POST", "/v1/session", "", "User-Agent", "ua")
	if r.body["status"] != "issued" {
		t.Fatalf("puzzle-free token: %s", r.raw)
	}
	if r := vote(r.body["token"].(string), "i1"); r.status != 401 || r.code() != "session_required" {
		t.Fatalf("public poll with a token that skipped the puzzle: %d %s", r.status, r.raw)
	}
	tok, _, _ := tn.getToken(t, "ua")
	if r := vote(tok, "i2"); r.status != 200 {
		t.Fatalf("public poll with an earned token: %d %s", r.status, r.raw)
	}
	// The poll allows one vote per voter every 2 s (burst 1): the next is refused.
	if r := vote(tok, "i3"); r.status != 429 || r.code() != "rate_limited" {
		t.Fatalf("poll's own voter limit: %d %s", r.status, r.raw)
	}
	if r := tn.admin(t, "POST", "/v1/polls", `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"limits":{"ip_rate":-1}}`); r.status != 400 {
		t.Fatalf("negative limit accepted: %d %s", r.status, r.raw)
	}
}

// With --require-session, votes over the WebSocket carry the voter token
// in the message and count under its voter; without one, with a forged
// one, or one bound to another device (User-Agent), they are refused with
// the same codes as over HTTP and change nothing.
func TestWebSocketVotesCarryTheToken(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.RequireSession, c.PowBits = true, 4 })
	tn.createPoll(t, "p")
	tok, voter, _ := tn.getToken(t, "phone")
	dialAs := func(ua string) *websocket.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tn.url, "http")+"/v1/polls/p/live",
			&websocket.DialOptions{HTTPHeader: http.Header{"User-Agent": {ua}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	send := func(c *websocket.Conn, token, option, idem string) map[string]any {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		msg, _ := json.Marshal(map[string]any{"type": "vote", "ref": idem, "token": token,
			"body": map[string]string{"option": option, "voter": "whatever", "idem": idem}})
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			t.Fatal(err)
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			json.Unmarshal(b, &m)
			if m["ref"] == idem {
				return m
			}
		}
	}
	phone := dialAs("phone")
	if m := send(phone, tok, "b", "w1"); m["type"] != "ack" {
		t.Fatalf("socket vote with the token: %v", m)
	}
	code := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		s, _ := e["code"].(string)
		return s
	}
	if m := send(phone, "", "a", "w2"); code(m) != "session_required" {
		t.Fatalf("without a token: %v", m)
	}
	if m := send(phone, tok[:len(tok)-3]+"AAA", "a", "w3"); code(m) != "session_invalid" {
		t.Fatalf("forged token: %v", m)
	}
	if m := send(dialAs("laptop"), tok, "a", "w4"); code(m) != "session_mismatch" {
		t.Fatalf("token of another device: %v", m)
	}
	if got := tn.totals(t, "p"); got["b"] != 1 || got["_total"] != 1 {
		t.Fatalf("totals: %v", got)
	}
	var found bool
	for r, err := range tn.Ledger().Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		found = found || r.Voter == voter
	}
	if !found {
		t.Fatal("the socket vote was not counted under the token's voter")
	}
}

// One puzzle solution earns one token in the whole cluster: a second
// region with the same session secret refuses it, and so does the issuing
// node after a restart.
func TestPuzzleSolutionIsSingleUseClusterWide(t *testing.T) {
	secret := func(c *Config) {
		c.PowBits, c.SessionSecret = 4, "a shared session secret of 32 b!"
	}
	dir := t.TempDir()
	a := startNode(t, dir, secret)
	b := startNode(t, t.TempDir(), secret)
	r := a.call(t, "POST", "/v1/session", "", "User-Agent", "phone")
	ch, bits := r.body["challenge"].(string), int(r.body["bits"].(float64))
	nonce := 0
	for session.LeadingZeroBits(ch, strconv.Itoa(nonce)) < bits {
		nonce++
	}
	body, _ := json.Marshal(map[string]string{"challenge": ch, "nonce": strconv.Itoa(nonce)})
	if r := b.call(t, "POST", "/v1/session", string(body), "User-Agent", "phone"); r.status != http.StatusForbidden || r.code() != "puzzle_failed" {
		t.Fatalf("at another region: %d %s", r.status, r.raw)
	}
	if r := a.call(t, "POST", "/v1/session", string(body), "User-Agent", "phone"); r.status != http.StatusOK || r.body["status"] != "issued" {
		t.Fatalf("at the issuer: %d %s", r.status, r.raw)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	a2 := startNodeAt(t, dir, a.clock.ms.Load(), secret)
	if r := a2.call(t, "POST", "/v1/session", string(body), "User-Agent", "phone"); r.status != http.StatusForbidden || r.code() != "puzzle_failed" {
		t.Fatalf("after a restart: %d %s", r.status, r.raw)
	}
}

// TestTokenBudgetHoldsAcrossTheCluster: one address farming tokens at every
// region holds one budget. Its first --vouched-tokens count, wherever they
// were issued; the votes of later ones are acknowledged and shadowed; and
// a region restarted in the middle learns the counts back from its peers,
// so the restart gives the address no new budget.
func TestTokenBudgetHoldsAcrossTheCluster(t *testing.T) {
	t.Parallel()
	const vouched = 4
	nodes := startCluster(t, []string{"eu", "us", "ap"}, func(_ int, c *Config) {
		c.RequireSession, c.PowBits, c.VouchedTokens, c.VouchPace = true, NoPuzzle, vouched, 1000
		c.SessionSecret = "a shared session secret of 32 b!"
	})
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	group := nodes[0].state.Hash("tokens 127.0.0.1")
	held := func(tn *testNode) uint64 {
		return tn.state.Budget.Within(group, tn.clock.ms.Load(), 240)
	}
	issued := 0
	farm := func(tn *testNode) {
		t.Helper()
		r := tn.call(t, "POST", "/v1/session", "", "User-Agent", fmt.Sprintf("browser %d", issued))
		if r.status != http.StatusOK || r.body["status"] != "issued" {
			t.Fatalf("token %d at %s: %d %s", issued, tn.replica, r.status, r.raw)
		}
		issued++
		waitFor(t, func() bool { // every region hears of it before the next is asked for
			for _, n := range nodes {
				if held(n) != uint64(issued) {
					return false
				}
			}
			return true
		})
		r = tn.call(t, "POST", "/v1/polls/p/votes", fmt.Sprintf(`{"option":"a","voter":"me","idem":"k%d"}`, issued),
			"User-Agent", fmt.Sprintf("browser %d", issued-1), ingest.SessionHeader, r.body["token"].(string))
		if r.status != http.StatusOK || !strings.Contains(r.raw, `"accepted"`) {
			t.Fatalf("vote %d at %s: %d %s", issued, tn.replica, r.status, r.raw)
		}
	}
	for i := range vouched + 2 {
		farm(nodes[i%3])
	}
	// counted waits for every region to count want: after ap's restart
	// that takes its rejoin and a push-pull, which a loaded machine (the
	// whole suite on two cores) has stretched past 10 s.
	counted := func(want int64) {
		t.Helper()
		testwait.For(t, 40*time.Second, fmt.Sprintf("every region counting %d", want), func() bool {
			for _, n := range nodes {
				if n.totals(t, "p")["_total"] != want {
					return false
				}
			}
			return true
		})
	}
	counted(vouched)

	// Restart ap: it comes back knowing the address's six tokens (two of
	// its own) from its own store, before it hears from eu and us.
	ap := nodes[2]
	dir, ms := ap.cfg.DataDir, ap.clock.ms.Load()
	if err := ap.stop(); err != nil {
		t.Fatal(err)
	}
	nodes[2] = startNodeAt(t, dir, ms, func(c *Config) {
		c.Region, c.Join, c.PushPull = "ap", []string{nodes[0].GossipAddr()}, 500*time.Millisecond
		c.RequireSession, c.PowBits, c.VouchedTokens = true, NoPuzzle, vouched
		c.SessionSecret = "a shared session secret of 32 b!"
	})
	if got := held(nodes[2]); got != uint64(issued) {
		t.Fatalf("the restarted region holds %d of the address's %d tokens", got, issued)
	}
	farm(nodes[2])
	counted(vouched)
	if got := counterValue(t, nodes[2], "tally_sessions_total", "issued_unvouched"); got != 1 {
		t.Fatalf("the restarted region issued %v unvouched tokens, want 1 (the one past the budget)", got)
	}
}

// TestTokenBudgetSurvivesARestart: a lone node keeps its token counts in
// its data dir: after a restart the address's next token is still past
// its vouched ones, and its vote is shadowed.
func TestTokenBudgetSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	opts := func(c *Config) { c.RequireSession, c.PowBits, c.VouchedTokens = true, NoPuzzle, 2 }
	tn := startNode(t, dir, opts)
	tn.createPoll(t, "p")
	vote := func(tn *testNode, i int) {
		t.Helper()
		ua := fmt.Sprintf("browser %d", i)
		r := tn.call(t, "POST", "/v1/session", "", "User-Agent", ua)
		if r.status != http.StatusOK {
			t.Fatalf("token %d: %d %s", i, r.status, r.raw)
		}
		r = tn.call(t, "POST", "/v1/polls/p/votes", fmt.Sprintf(`{"option":"a","voter":"me","idem":"k%d"}`, i),
			"User-Agent", ua, ingest.SessionHeader, r.body["token"].(string))
		if r.status != http.StatusOK {
			t.Fatalf("vote %d: %d %s", i, r.status, r.raw)
		}
	}
	vote(tn, 1)
	vote(tn, 2)
	ms := tn.clock.ms.Load()
	if err := tn.stop(); err != nil {
		t.Fatal(err)
	}
	tn = startNodeAt(t, dir, ms, opts)
	vote(tn, 3)
	if got := tn.totals(t, "p")["_total"]; got != 2 {
		t.Fatalf("counted %d after the restart, want 2: the restart gave the address a new budget", got)
	}
}

// TestFlagsRefuseBadValues: the voter-token, rate and trust flags refuse
// what they cannot mean, at start, in one line naming the flag.
func TestFlagsRefuseBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--vouched-tokens", "-1"}, {"--quiz-vouched-tokens", "-3"}, {"--tokens-per-minute", "-1"},
		{"--tokens-per-minute", "2000000"}, {"--vouch-pace", "NaN"}, {"--vouch-pace", "-1"}, {"--vouch-pace", "+Inf"},
		{"--session-ttl", "30s"}, {"--session-ttl", "25h"}, {"--shared-networks", "10.0.0.0/33"}, {"--shared-networks", "venue"},
		{"--tokens-per-minute", "0"}, {"--vouched-tokens", "0"}, {"--pow-bits", "300"}, {"--pow-bits", "33"}, {"--pow-bits", "-5"},
		{"--trust-floor", "2"}, {"--trust-floor", "-0.1"}, {"--trust-floor", "NaN"}, {"--rate-ip", "NaN"}, {"--rate-voter", "NaN"},
		{"--rate-ip", "-1"}, {"--rate-voter", "+Inf"}, {"--rate-ip-burst", "-1"}, {"--catch-up-wait", "-1s"}, {"--catch-up-wait", "1h"},
		{"--max-tick", "5s"}, {"--max-tick", "100ms"}, {"--fanout-cpu", "-1"}, {"--fanout-cpu", "NaN"}, {"--fanout-cpu", "+Inf"},
		{"--join", "eu-1.example.net"}, {"--join", ":7946"}, {"--join", "a:1,b"}, {"--trusted-proxies", "10.0.0.0/40"}, {"--trusted-proxies", "proxy"},
	} {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("tally", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.RegisterFlags(fs)
		err := fs.Parse(args)
		if err == nil {
			cfg.DataDir = t.TempDir()
			_, err = Open(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), args[0]) && !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line naming %s", args, err, args[0])
		}
	}
}

// A phone that moves from Wi-Fi to cellular is refused with its old token
// (bound to the old address), earns a new one presenting the old one as
// "previous", and keeps its voter id: its change of mind moves its vote
// rather than adding a second one (issue 45, item 4). A previous token
// this cluster did not sign earns a new voter.
func TestANewNetworkKeepsTheVoter(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) {
		c.RequireSession, c.PowBits, c.TrustedProxies = true, 4, mustCIDRs("127.0.0.1/32")
	})
	tn.createPoll(t, "p")
	earn := func(addr, previous string) (token, voter string) { t.Helper(); return earnToken(t, tn, addr, previous) }
	castAs := func(addr, token, option, idem string) response {
		return tn.call(t, "POST", "/v1/polls/p/votes", vote(option, "ignored", idem), "User-Agent", "phone", "X-Forwarded-For", addr, "Tally-Session", token)
	}
	wifi, voter := earn("198.51.100.7", "")
	if r := result(t, castAs("198.51.100.7", wifi, "a", "k1"), 0); r["status"] != "accepted" {
		t.Fatalf("on Wi-Fi: %v", r)
	}
	if r := castAs("203.0.113.9", wifi, "b", "k2"); r.status != http.StatusUnauthorized || r.code() != "session_mismatch" {
		t.Fatalf("the old token on cellular: %d %s", r.status, r.raw)
	}
	cell, again := earn("203.0.113.9", wifi)
	if again != voter {
		t.Fatalf("the new network's token is for voter %s, want %s", again, voter)
	}
	if r := result(t, castAs("203.0.113.9", cell, "b", "k2"), 0); r["status"] != "accepted" {
		t.Fatalf("on cellular: %v", r)
	}
	if tot := tn.totals(t, "p"); tot["a"] != 0 || tot["b"] != 1 || tot["_total"] != 1 {
		t.Fatalf("totals %v, want the change of mind alone (b: 1)", tot)
	}
	if _, other := earn("203.0.113.10", "s1.forged.token"); other == voter || other == "" {
		t.Fatalf("a forged previous token gave voter %q", other)
	}
	tn.clock.advance(25 * time.Hour) // a token from another day's show speaks for no one
	if _, other := earn("203.0.113.11", cell); other == voter {
		t.Fatal("a previous token a day old passed on its voter")
	}
}

// earnToken earns a voter token at tn from addr, solving its puzzle and
// presenting previous ("" for none); it returns the token and its voter.
func earnToken(t *testing.T, tn *testNode, addr, previous string) (token, voter string) {
	t.Helper()
	r := tn.call(t, "POST", "/v1/session", "", "User-Agent", "phone", "X-Forwarded-For", addr)
	ch, bits := r.body["challenge"].(string), int(r.body["bits"].(float64))
	nonce := 0
	for session.LeadingZeroBits(ch, strconv.Itoa(nonce)) < bits {
		nonce++
	}
	body, _ := json.Marshal(map[string]string{"challenge": ch, "nonce": strconv.Itoa(nonce), "previous": previous})
	r = tn.call(t, "POST", "/v1/session", string(body), "User-Agent", "phone", "X-Forwarded-For", addr)
	if r.status != http.StatusOK || r.body["status"] != "issued" {
		t.Fatalf("session from %s: %d %s", addr, r.status, r.raw)
	}
	return r.body["token"].(string), r.body["voter"].(string)
}

// A voter id passed from token to token as "previous" lives 24 hours
// from its first issue, however often it is passed on: each new token
// carries the first issue's time (issue 58).
func TestPreviousChainEndsADayAfterTheFirstIssue(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) {
		c.RequireSession, c.PowBits, c.TrustedProxies = true, 4, mustCIDRs("127.0.0.1/32")
	})
	first, voter := earnToken(t, tn, "198.51.100.7", "")
	tn.clock.advance(20 * time.Hour)
	second, again := earnToken(t, tn, "203.0.113.9", first)
	if again != voter {
		t.Fatalf("20 h after the first issue the voter id passed to %s, want %s", again, voter)
	}
	tn.clock.advance(3 * time.Hour)
	third, again := earnToken(t, tn, "203.0.113.10", second)
	if again != voter {
		t.Fatalf("23 h after the first issue the voter id passed to %s, want %s", again, voter)
	}
	tn.clock.advance(2 * time.Hour) // 25 h after the first issue, 2 h after the third
	if _, other := earnToken(t, tn, "203.0.113.11", third); other == voter {
		t.Fatal("a voter id passed on 25 h after its first issue: chaining previous keeps it alive forever")
	}
}
