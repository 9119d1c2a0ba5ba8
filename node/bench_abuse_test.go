package node

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/ingest"
)

// BenchmarkAbuseSimulation is the token-farming attack of issue 25 on a
// three-region cluster, measured, not asserted. 3,000 honest voters (one
// address each) split 50/50; an attacker with one IPv4 address, an IPv6
// /48 and 20 datacenter addresses farms voter tokens at every region for
// ten minutes (of the nodes' clocks) before the poll and votes "a" with
// every one; then a venue of 200 behind one declared address and a carrier
// NAT of 200 behind an undeclared one vote; then a two-question quiz (16
// combinations of answers) where the attacker's tokens cover every
// combination. It runs once without vouching (the budget's hard limit
// alone) and once as shipped. Clients reach the nodes through a trusted
// proxy (X-Forwarded-For), all on loopback. Run with ./bench/abuse.sh.
func BenchmarkAbuseSimulation(b *testing.B) {
	for _, vouched := range []int{1_000_000, ingest.DefaultVouched} {
		name := "vouched=default"
		if vouched != ingest.DefaultVouched {
			name = "vouched=off"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				runAbuse(b, vouched)
			}
		})
	}
}

// client is one simulated browser: an address, a user agent, a token.
type client struct {
	ip, ua, name string
	group        string // the attacker's address group; "" for honest
	at           *testNode
	token        string
}

// do sends a request as c through the trusted proxy.
func (c *client) do(method, path, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, c.at.url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Forwarded-For", c.ip)
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set(ingest.SessionHeader, c.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.at.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	json.Unmarshal(raw, &out)
	return res.StatusCode, out, nil
}

// earn asks for a token, and again after Retry-After (by the process
// clock) up to tries times in all, as the page does; false when refused
// (429) every time.
func (c *client) earn(tries int) (bool, error) {
	status, body, err := c.do("POST", "/v1/session", "")
	for ; status == http.StatusTooManyRequests && tries > 1; tries-- {
		time.Sleep(time.Second) // the Retry-After of the pace (a minute's would not pass)
		status, body, err = c.do("POST", "/v1/session", "")
	}
	if err != nil || status == http.StatusTooManyRequests {
		return false, err
	}
	if status != http.StatusOK || body["status"] != "issued" {
		return false, fmt.Errorf("session as %s: %d %v", c.ip, status, body)
	}
	c.token = body["token"].(string)
	return true, nil
}

// vote casts one vote (or answer); it reports whether it was accepted.
func (c *client) vote(poll, option, idem string) (bool, error) {
	body := fmt.Sprintf(`{"option":%q,"voter":"x","idem":%q}`, option, idem)
	if c.name != "" {
		body = fmt.Sprintf(`{"option":%q,"voter":"x","idem":%q,"name":%q}`, option, idem, c.name)
	}
	status, out, err := c.do("POST", "/v1/polls/"+poll+"/votes", body)
	if err != nil || status == http.StatusTooManyRequests {
		return false, err
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("vote as %s at %s: %d %v", c.ip, poll, status, out)
	}
	return strings.Contains(fmt.Sprint(out), "accepted"), nil
}

// parallel runs f over clients on four workers and returns the first error.
func parallel(clients []*client, f func(*client) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan *client)
	for range 4 {
		wg.Go(func() {
			for c := range next {
				if err := f(c); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, c := range clients {
		next <- c
	}
	close(next)
	wg.Wait()
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sessions sums tally_sessions_total{outcome} over the nodes.
func sessions(b *testing.B, nodes []*testNode, outcome string) int {
	n := 0
	for _, tn := range nodes {
		n += int(counterValue(b, tn, "tally_sessions_total", outcome))
	}
	return n
}

// settled waits until every node shows the same totals for poll, twice
// in a row, and returns them.
func settled(b *testing.B, nodes []*testNode, poll string) map[string]int64 {
	var last string
	var out map[string]int64
	waitFor(b, func() bool {
		var views []string
		for _, n := range nodes {
			out = n.totals(b, poll)
			views = append(views, fmt.Sprint(out))
		}
		same := slices.Compact(views)
		ok := len(same) == 1 && same[0] == last
		last = same[0]
		time.Sleep(100 * time.Millisecond) // between the two looks
		return ok
	})
	return out
}

func runAbuse(b *testing.B, vouched int) {
	b.StopTimer()
	dc := filepath.Join(b.TempDir(), "datacenters")
	if err := os.WriteFile(dc, []byte("203.0.113.0/24\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	nodes := startCluster(b, []string{"eu", "us", "ap"}, func(_ int, c *Config) {
		c.RequireSession, c.PowBits, c.SessionSecret = true, NoPuzzle, "the abuse simulation's secret 32b"
		c.TrustedProxies, c.DatacenterFile, c.SharedNetworks = mustCIDRs("127.0.0.1/32"), dc, mustCIDRs("192.0.2.0/24")
		c.VouchedTokens, c.VouchPace = vouched, 1
		if vouched > ingest.DefaultVouched { // the budget's hard limit alone
			c.QuizVouchedTokens, c.VouchPace = vouched, 0
		}
	})
	// The cluster has been up for a while, as on a broadcast night: every
	// region hears every other's token counts (the gateways are up).
	for i, at := range nodes {
		probe := &client{ip: fmt.Sprintf("192.0.2.%d", 200+i), ua: "probe", at: at}
		if _, err := probe.earn(1); err != nil || probe.token == "" {
			b.Fatalf("probe: %v", err)
		}
		group := at.state.Hash("tokens " + probe.ip)
		waitFor(b, func() bool {
			for _, n := range nodes {
				if n.state.Budget.Within(group, n.clock.ms.Load(), 60) != 1 {
					return false
				}
			}
			return true
		})
	}
	probes := sessions(b, nodes, "issued")
	rng := rand.New(rand.NewPCG(25, 3))
	b.StartTimer()

	// The attacker farms: 20 rounds 30 s apart, at every region at once.
	var attacker []*client
	groups := map[string][]*client{}
	refused := 0
	for round := range 20 {
		advanceAll(nodes, 30*time.Second)
		var asks []*client
		for r, at := range nodes {
			for k := range 2 {
				asks = append(asks, &client{ip: "198.51.100.77", group: "ipv4", at: at})
				asks = append(asks, &client{ip: fmt.Sprintf("2001:db8:77:%x::%d", rng.IntN(1<<16), k+1), group: "ipv6-48", at: at})
			}
			for d := range 20 {
				asks = append(asks, &client{ip: fmt.Sprintf("203.0.113.%d", d+1), group: fmt.Sprintf("dc%d", d), at: at})
			}
			_ = r
		}
		for i, c := range asks {
			c.ua = fmt.Sprintf("bot %d/%d", round, i)
		}
		var mu sync.Mutex
		if err := parallel(asks, func(c *client) error {
			ok, err := c.earn(2) // a persistent attacker asks again
			mu.Lock()
			defer mu.Unlock()
			if ok {
				attacker = append(attacker, c)
				groups[c.group] = append(groups[c.group], c)
			} else if err == nil {
				refused++
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	attackerVouched := sessions(b, nodes, "issued") - probes
	attackerTokens := attackerVouched + sessions(b, nodes, "issued_unvouched")

	// The poll: 3,000 honest voters, 1,500 a and 1,500 b, and the
	// attacker's every token on a.
	nodes[0].admin(b, "POST", "/v1/polls", `{"id":"show","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600,"grace_s":5}`)
	havePoll(b, nodes, "show")
	var voters []*client
	for i := range 3000 {
		n := i + 1 // 10.0.0.1 on
		voters = append(voters, &client{ip: fmt.Sprintf("10.%d.%d.%d", n>>16, n>>8&255, n&255), ua: "phone", at: nodes[i%3]})
	}
	for i, c := range voters {
		if _, err := c.earn(5); err != nil || c.token == "" {
			b.Fatalf("honest voter %d: no token: %v", i, err)
		}
	}
	type ballot struct {
		c      *client
		option string
	}
	var ballots []ballot
	for i, c := range voters {
		ballots = append(ballots, ballot{c, string(rune('a' + i%2))})
	}
	for _, c := range attacker {
		ballots = append(ballots, ballot{c, "a"})
	}
	rng.Shuffle(len(ballots), func(i, j int) { ballots[i], ballots[j] = ballots[j], ballots[i] })
	byClient := map[*client]string{}
	var order []*client
	for _, bl := range ballots {
		byClient[bl.c] = bl.option
		order = append(order, bl.c)
	}
	var mu sync.Mutex
	attackAccepted := 0
	if err := parallel(order, func(c *client) error {
		ok, err := c.vote("show", byClient[c], "show-"+c.ua+c.ip)
		if ok && c.group != "" {
			mu.Lock()
			attackAccepted++
			mu.Unlock()
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	show := settled(b, nodes, "show")
	share := float64(show["a"]) / float64(show["a"]+show["b"])

	// The venue and the carrier NAT: 200 each behind one address, asking
	// for a token at once (retrying as the page does), voting a or b.
	nodes[0].admin(b, "POST", "/v1/polls", `{"id":"venue","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600,"grace_s":5}`)
	nodes[0].admin(b, "POST", "/v1/polls", `{"id":"cgnat","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600,"grace_s":5}`)
	havePoll(b, nodes, "cgnat")
	crowd := func(ip, poll string) int {
		var people []*client
		for i := range 200 {
			people = append(people, &client{ip: ip, ua: fmt.Sprintf("phone %d", i), at: nodes[i%3]})
		}
		var mu sync.Mutex
		tokens := 0
		if err := parallel(people, func(c *client) error {
			ok, err := c.earn(5) // the page's retries
			if err != nil || !ok {
				return err
			}
			mu.Lock()
			tokens++
			mu.Unlock()
			_, err = c.vote(poll, string(rune('a'+len(c.ua)%2)), c.ua)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return tokens
	}
	venueTokens, natTokens := crowd("192.0.2.50", "venue"), crowd("100.64.0.9", "cgnat")
	venue, nat := settled(b, nodes, "venue"), settled(b, nodes, "cgnat")

	// The quiz: two questions of four options; 50 honest participants;
	// every attacker token, the first of each group first, covers the 16
	// combinations in turn, answering 200 ms after the start; the
	// fastest honest participant answers both right at 1.5 s.
	const quizDef = `{"id":"q","title":"Quiz","questions":[` +
		`{"text":"One?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"},{"id":"d","label":"D"}],"correct":["c"]},` +
		`{"text":"Two?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"},{"id":"d","label":"D"}],"correct":["b"]}]}`
	if r := nodes[0].admin(b, "POST", "/v1/quizzes", quizDef); r.status != http.StatusCreated {
		b.Fatalf("quiz: %d %s", r.status, r.raw)
	}
	havePoll(b, nodes, "q-2")
	var sybils []*client
	names := slices.Sorted(func(yield func(string) bool) {
		for g := range groups {
			if !yield(g) {
				return
			}
		}
	})
	for depth := 0; ; depth++ {
		added := false
		for _, g := range names {
			if depth < len(groups[g]) {
				sybils, added = append(sybils, groups[g][depth]), true
			}
		}
		if !added {
			break
		}
	}
	combo := map[*client]int{}
	for i, c := range sybils {
		combo[c], c.name = i%16, fmt.Sprintf("sybil-%d", i)
	}
	var players []*client
	for i := range 50 {
		c := &client{ip: fmt.Sprintf("10.200.0.%d", i+1), ua: "phone", at: nodes[i%3], name: fmt.Sprintf("honest-%d", i)}
		if _, err := c.earn(5); err != nil || c.token == "" {
			b.Fatalf("player %d: %v", i, err)
		}
		players = append(players, c)
	}
	for q, correct := range []string{"c", "b"} {
		poll := fmt.Sprintf("q-%d", q+1)
		if r := nodes[0].admin(b, "POST", "/v1/quizzes/q/start", ""); r.status != http.StatusOK {
			b.Fatalf("start %d: %d %s", q+1, r.status, r.raw)
		}
		waitFor(b, func() bool {
			for _, n := range nodes {
				if _, ok := n.state.Defs.Poll(poll); !ok || n.call(b, "GET", "/v1/polls/"+poll, "").status != http.StatusOK {
					return false
				}
			}
			return true
		})
		advanceAll(nodes, 200*time.Millisecond)
		if err := parallel(sybils, func(c *client) error {
			pick := combo[c]
			if q == 0 {
				pick /= 4
			}
			_, err := c.vote(poll, string(rune('a'+pick%4)), poll+c.ua+c.ip)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		advanceAll(nodes, 1300*time.Millisecond)
		if _, err := players[0].vote(poll, correct, poll+"0"); err != nil {
			b.Fatal(err)
		}
		advanceAll(nodes, 1500*time.Millisecond)
		if err := parallel(players[1:], func(c *client) error {
			option := correct
			if rng.IntN(10) < 4 {
				option = "a"
			}
			_, err := c.vote(poll, option, poll+c.ip)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		advanceAll(nodes, time.Second) // the close comes after the last answer's millisecond
		nodes[0].admin(b, "POST", "/v1/quizzes/q/close", "")
		nodes[0].admin(b, "POST", "/v1/quizzes/q/reveal", "")
	}
	advanceAll(nodes, 10*time.Second)
	certifiedEverywhere(b, nodes, "q-1")
	certifiedEverywhere(b, nodes, "q-2")
	r := nodes[0].call(b, "GET", "/v1/quizzes/q/leaderboard?top=100", "")
	var lb struct {
		Standings []struct {
			Rank  int
			Name  string
			Score int64
		}
		Participants int
	}
	json.Unmarshal([]byte(r.raw), &lb)
	honestRank, sybilRank, ranked := 0, 0, map[int]bool{}
	for _, s := range lb.Standings {
		switch {
		case s.Name == "honest-0":
			honestRank = s.Rank
		case strings.HasPrefix(s.Name, "sybil-"):
			var i int
			fmt.Sscanf(s.Name, "sybil-%d", &i)
			ranked[i%16] = true
			if sybilRank == 0 {
				sybilRank = s.Rank
			}
		}
	}
	b.StopTimer()

	moved := (share - 0.5) * 100
	b.ReportMetric(moved, "pp_moved")
	b.ReportMetric(float64(show["_total"]-3000), "attacker_votes_counted")
	b.ReportMetric(float64(len(ranked)), "sybil_combos_ranked/16")
	fmt.Printf("\n%s: vouched tokens per address group %d\n", b.Name(), vouched)
	fmt.Printf("  attacker: %d tokens (%d refused 429), %d vouched; %d votes accepted, %d counted\n",
		attackerTokens, refused, attackerVouched, attackAccepted, show["_total"]-3000)
	fmt.Printf("  poll: a %d, b %d: share of a %.2f%% (%+.2f pp)\n", show["a"], show["b"], share*100, moved)
	fmt.Printf("  venue (declared): %d/200 tokens, %d counted; carrier NAT (undeclared): %d/200 tokens, %d counted\n",
		venueTokens, venue["_total"], natTokens, nat["_total"])
	fmt.Printf("  quiz: %d participants ranked; fastest honest rank %d; best sybil rank %d; ranked sybils cover %d of 16 combinations\n",
		lb.Participants, honestRank, sybilRank, len(ranked))
}
