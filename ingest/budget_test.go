package ingest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"tally/api"
	"tally/session"
	"tally/trust"
)

// budgetRig is a rig whose pipeline issues voter tokens without a puzzle,
// on a clock the test moves (*now).
func budgetRig(t *testing.T, s Sessions, now *time.Time) (*rig, *session.Signer) {
	t.Helper()
	r := newRig(t, t.TempDir())
	*now = time.Now().Truncate(time.Minute) // the sliding minute weighs the previous one: start at a minute's start, as the figures below assume
	signer, err := session.NewSigner([]byte("a session secret, 32 bytes long!"), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Signer, s.TTL = signer, time.Hour
	p, err := New(Config{Ledger: r.l, State: r.st, Clock: r.p.cfg.Clock, Limits: Limits{MaxBody: 1 << 14}, Sessions: s, TrustFloor: trust.DefaultFloor,
		Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	p.sessions.paceNow = func() time.Time { return *now }
	r.p = p
	return r, signer
}

// token asks for a token as ip and returns its slot (0: refused).
func (r *rig) token(t *testing.T, signer *session.Signer, ip string) int {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/session", nil)
	req.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(ip), 4000).String()
	req.Header.Set("User-Agent", "phone")
	w := httptest.NewRecorder()
	r.p.HandleSession(w, req)
	if w.Code == http.StatusTooManyRequests {
		return 0
	}
	var resp SessionResponse
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil {
		t.Fatalf("session as %s: %d %s", ip, w.Code, w.Body)
	}
	tok, err := signer.Verify(resp.Token, session.ClientHash(ip, "phone"))
	if err != nil {
		t.Fatal(err)
	}
	return tok.Slot
}

// TestTokenSlotsPerAddressGroup: a token's slot counts the tokens of its
// address group — an IPv4 address, an IPv6 /48 across its /64s — and not
// of another; vouched ones come at most one a second; a shared network's
// are all vouched; past TokensPerMinute the answer is 429.
func TestTokenSlotsPerAddressGroup(t *testing.T) {
	var now time.Time
	r, signer := budgetRig(t, Sessions{TokensPerMinute: 6, Vouched: 3, QuizVouched: 1, VouchPace: 1,
		Shared: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}, &now)
	for want := 1; want <= 6; want++ {
		if want <= 3 && want > 1 {
			if got := r.token(t, signer, "203.0.113.7"); got != 0 {
				t.Fatalf("a second vouched token within the second: slot %d, want 429", got)
			}
			now = now.Add(time.Second)
		}
		if got := r.token(t, signer, "203.0.113.7"); got != want {
			t.Fatalf("IPv4 token %d: slot %d", want, got)
		}
	}
	if got := r.token(t, signer, "203.0.113.7"); got != 0 {
		t.Fatalf("the 7th token in a minute was issued (slot %d), want 429", got)
	}
	if got := r.token(t, signer, "203.0.113.8"); got != 1 {
		t.Fatalf("the next address shares the budget: slot %d", got)
	}
	for i, ip := range []string{"2001:db8:1:1::1", "2001:db8:1:2::1", "2001:db8:1:ffff::9", "2001:db8:1:1::2"} {
		now = now.Add(time.Second)
		if got := r.token(t, signer, ip); got != i+1 {
			t.Fatalf("IPv6 token %d from %s (one /48): slot %d", i+1, ip, got)
		}
	}
	if got := r.token(t, signer, "2001:db8:2::1"); got != 1 {
		t.Fatalf("another /48: slot %d", got)
	}
	for i := range 10 {
		if got := r.token(t, signer, "198.51.100.9"); got != 1 {
			t.Fatalf("shared network token %d: slot %d, want all vouched", i+1, got)
		}
	}
	for _, c := range []struct {
		slot int
		quiz bool
		want bool
	}{{0, false, false}, {1, false, false}, {3, false, false}, {4, false, true}, {1, true, false}, {2, true, true}} {
		if got := r.p.sessions.overBudget(c.slot, c.quiz); got != c.want {
			t.Errorf("overBudget(%d, quiz %v) = %v", c.slot, c.quiz, got)
		}
	}
}

// TestVotesPastTheBudgetAreShadowed: a token past its group's vouched ones
// still votes (acknowledged, ledgered) and is not counted.
func TestVotesPastTheBudgetAreShadowed(t *testing.T) {
	var now time.Time
	r, _ := budgetRig(t, Sessions{Vouched: 2}, &now)
	for i, slot := range []int{1, 2, 3, 9} {
		c := Client{Sender: api.Sender{IP: "203.0.113.7", SocketAge: -1, RTTMs: -1}, TokenAge: time.Hour, TokenSlot: slot}
		res, err := r.p.SubmitFrom("p", []Vote{{Voter: "v" + string(rune('0'+i)), Option: "a", Idem: "k" + string(rune('0'+i))}}, c)
		if err != nil || res[0].Status != "accepted" {
			t.Fatalf("slot %d: %+v %v", slot, res, err)
		}
	}
	totals, total, err := r.st.Totals("p")
	if err != nil || total != 2 || totals["a"] != 2 {
		t.Fatalf("counted %v (total %d), want the 2 vouched: %v", totals, total, err)
	}
}

// A quiz stream's join counts among the joined as the participant's
// answers would rank: a valid token within its address's quiz budget;
// not one past it, a forged or foreign one, or none. The token names the participant, whatever the join says.
func TestParticipantCountsAsTheAnswersRank(t *testing.T) {
	var now time.Time
	r, signer := budgetRig(t, Sessions{Require: true, QuizVouched: 2}, &now)
	issue := func(slot int) string {
		tok, _, err := signer.Issue(session.ClientHash("203.0.113.9", "phone"), true, slot)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, c := range []struct {
		name, token, ip string
		counted         bool
		named           bool
	}{
		{"within the budget", issue(2), "203.0.113.9", true, true},
		{"past the budget", issue(3), "203.0.113.9", false, true},
		{"another client's", issue(1), "198.51.100.7", false, false},
		{"forged", "s1.forged", "203.0.113.9", false, false},
		{"none where required", "", "203.0.113.9", false, false},
	} {
		voter, counted := r.p.Participant(c.token, "phone", c.ip)
		if counted != c.counted || (voter != "") != c.named {
			t.Errorf("%s: voter %q counted %v; want counted %v, named %v", c.name, voter, counted, c.counted, c.named)
		}
	}
	// Where answers may come without a token, a join without one still
	// does not count: the number goes on air.
	open, _ := budgetRig(t, Sessions{QuizVouched: 2}, &now)
	if voter, counted := open.p.Participant("", "phone", "203.0.113.9"); voter != "" || counted {
		t.Errorf("no token where none is required: %q %v", voter, counted)
	}
}
