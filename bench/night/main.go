package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tally/ingest"
	"tally/session"
)

var optionIDs = []string{"red", "green", "blue", "gold"}

const userAgent = "night-voter/1"

func main() {
	flag.CommandLine.Init("bench/night", flag.ExitOnError) // not the temporary binary's path
	small := flag.Bool("small", false, "100,000 votes and 2,000 viewers (under a minute)")
	votes := flag.Int("votes", 1_000_000, "votes: first votes and changes of mind (retries come on top)")
	nviewers := flag.Int("viewers", 15_000, "WebSocket viewers, spread over the regions")
	bin := flag.String("node-bin", "", "the node binary (bench/night.sh builds it)")
	workers := flag.Int("workers", 640, "requests in flight at most, all regions together")
	dir := flag.String("dir", "", "where the nodes keep their data (default: a temporary directory, removed)")
	edges := flag.Int("edges", 0, "edges a region (0-20): viewers and voters on the edges, votes on the viewers' sockets (0: on the full nodes, votes over HTTP)")
	flag.Parse()
	if *small {
		*votes, *nviewers = 100_000, 2_000
	}
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "night: --node-bin is required (run ./bench/night.sh)")
		os.Exit(2)
	}
	if *edges < 0 || *edges > 20 {
		fmt.Fprintf(os.Stderr, "night: --edges %d: want 0-20 edges a region\n", *edges)
		os.Exit(2)
	}
	if *edges > 0 && *nviewers < 3**edges {
		fmt.Fprintf(os.Stderr, "night: --viewers %d: with --edges %d want at least %d (the voters' sockets are the viewers')\n", *nviewers, *edges, 3**edges)
		os.Exit(2)
	}
	if err := run(*bin, *dir, *votes, *nviewers, *workers, *edges); err != nil {
		fmt.Fprintln(os.Stderr, "night:", err)
		os.Exit(1)
	}
}

// outcome is what the generator saw of one request.
type outcome struct {
	status string // accepted, duplicate, late, rejected:<code>, error
	lat    time.Duration
	phase  int
	lag    time.Duration // sent this long after its planned time
	socket bool          // sent on a socket (--edges), not over HTTP
}

func run(bin, dir string, votes, nviewers, workers, edges int) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "night")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	names := []string{"eu-west", "us-east", "ap-south"}
	fmt.Printf("night: %d votes, %d viewers, three regions, %d edge(s) a region; data in %s\n", votes, nviewers, edges, dir)
	cl, err := startCluster(bin, dir, names, nviewers, edges)
	if cl != nil {
		defer cl.stop()
	}
	if err != nil {
		return err
	}
	var urls []string
	for _, r := range cl.regions {
		urls = append(urls, r.url)
	}
	for _, id := range []string{"night", "probe"} {
		if err := createPoll(urls[0], cl.adminToken, id); err != nil {
			return err
		}
	}
	if err := waitEverywhere(urls, "/v1/polls/night", "/v1/polls/probe"); err != nil {
		return err
	}

	// Where voters and viewers are: on the full nodes (votes over HTTP), or
	// on the edges (--edges: votes on the viewers' sockets; see sockets.go).
	onEdges := edges > 0
	perRegion := nviewers / len(names) // sockets a region, with --edges
	socketOf := func(v int) int { return v%len(names) + len(names)*(v/len(names)%perRegion) }
	addrOf := voterIP
	if onEdges {
		addrOf = func(v int) string { return viewerAddr(socketOf(v)) }
	}
	voteURL := func(region, voter int) string { // where a vote goes over HTTP
		if onEdges {
			return cl.edges[region][voter%edges].url
		}
		return urls[region]
	}
	at := func(i int) (string, string, string) { return urls[i%len(urls)], viewerAddr(i), "night-viewer/1" }
	if onEdges {
		at = func(i int) (string, string, string) {
			return cl.edges[i%len(names)][i/len(names)%edges].url, viewerAddr(i), userAgent
		}
	}

	rng := rand.New(rand.NewPCG(20261130, 1))
	p := makePlan(votes, len(names), rng)
	fmt.Printf("night: plan: %d voters, %d requests, planned peak %.0f votes/s\n", p.voters, len(p.sends), p.peak)
	signer, err := session.NewSigner(cl.sessionSecret, ingest.DefaultSessionTTL, time.Now)
	if err != nil {
		return err
	}
	start := time.Now()
	tokens := make([]string, p.voters+2000)
	voterIDs := make([]string, len(tokens))
	for i := range tokens {
		tok, t, err := signer.Issue(session.ClientHash(addrOf(i), userAgent), false, 1)
		if err != nil {
			return err
		}
		tokens[i], voterIDs[i] = tok, t.Voter
	}
	fmt.Printf("night: %d voter tokens minted in %s\n", len(tokens), time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start = time.Now()
	var vw viewers
	vw.connect(ctx, at, "night", nviewers, onEdges)
	fmt.Printf("night: %d viewers connected in %s (%d failed)\n", int64(nviewers)-vw.failed.Load(), time.Since(start).Round(time.Millisecond), vw.failed.Load())
	var pr prober
	if err := pr.watch(ctx, voteURL(2, 0), "probe"); err != nil {
		return err
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers, IdleConnTimeout: time.Minute}}
	post := func(region int, voter int, option, idem, poll string) (string, time.Duration) {
		body := fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q}`, option, voterIDs[voter], idem)
		req, _ := http.NewRequest(http.MethodPost, voteURL(region, voter)+"/v1/polls/"+poll+"/votes", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", addrOf(voter))
		req.Header.Set("User-Agent", userAgent)
		req.Header.Set(ingest.SessionHeader, tokens[voter])
		t0 := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return "error", time.Since(t0)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		lat := time.Since(t0)
		if res.StatusCode != http.StatusOK {
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			json.Unmarshal(b, &e)
			return "rejected:" + e.Error.Code, lat
		}
		var r struct {
			Results []struct{ Status string } `json:"results"`
		}
		if json.Unmarshal(b, &r) != nil || len(r.Results) != 1 {
			return "error", lat
		}
		return r.Results[0].Status, lat
	}

	// Probes: one at a time at eu-west, seen at ap-south.
	probeDone := make(chan struct{})
	var probeWG sync.WaitGroup
	probeWG.Add(1)
	go func() {
		defer probeWG.Done()
		for k := int64(1); ; k++ {
			select {
			case <-probeDone:
				return
			case <-time.After(200 * time.Millisecond):
			}
			voter := p.voters + int(k)%2000
			status, _ := post(0, voter, optionIDs[k%4], fmt.Sprintf("probe-%d", k), "probe")
			acked := time.Now()
			if status != "accepted" {
				k-- // not counted: try again
				continue
			}
			if pr.seen(k) {
				pr.lat = append(pr.lat, time.Since(acked))
			} else {
				pr.lost++
			}
		}
	}()

	// The night: an open schedule. A change of mind or a retry is sent only
	// once the request it follows has been answered (the page waits for
	// the answer): until then it waits in pending, and the worker that
	// finishes that request sends it.
	acked := make([]atomic.Uint32, 2*p.voters) // 1: ledgered (any ack); 2: accepted
	var answeredN atomic.Int64
	outcomes := make([]outcome, len(p.sends))
	work := make(chan int, len(p.sends))
	var depMu sync.Mutex
	answered := make([]bool, 2*p.voters)
	pending := map[int][]int{}
	var wg sync.WaitGroup
	begin := time.Now().Add(broadcast.silence)
	cpuBefore := map[*region]float64{}
	for _, r := range cl.all() {
		cpuBefore[r] = procUsage(r.cmd.Process.Pid).cpu
	}
	var do func(i int)
	do = func(i int) {
		s := p.sends[i]
		slot := int(s.voter)*2 + int(s.vote)
		if s.retry || s.vote == 1 {
			dep := slot
			if !s.retry {
				dep = int(s.voter) * 2 // the first vote
			}
			depMu.Lock()
			if !answered[dep] {
				pending[dep] = append(pending[dep], i)
				depMu.Unlock()
				return
			}
			depMu.Unlock()
		}
		o := outcome{phase: broadcast.phase(s.at), lag: time.Since(begin.Add(s.at))}
		idem := fmt.Sprintf("n%d-%d", s.voter, s.vote)
		option := optionIDs[p.options[s.voter][s.vote]]
		// With --edges a vote at its voter's home region goes on its
		// socket; one at another region (3%, and a third of the retries)
		// over HTTP to an edge there, as the page falls back.
		var sock *voterSocket
		if onEdges && int(s.region) == int(s.voter)%len(names) {
			sock = vw.socks[socketOf(int(s.voter))]
		}
		if sock != nil {
			var paced time.Duration
			body := fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q}`, option, voterIDs[s.voter], idem)
			o.status, o.lat, paced = sock.vote(ctx, tokens[s.voter], body)
			o.lag += paced
			o.socket = true
		} else {
			o.status, o.lat = post(int(s.region), int(s.voter), option, idem, "night")
		}
		if o.status == "accepted" || o.status == "duplicate" || o.status == "late" {
			acked[slot].CompareAndSwap(0, 1)
		}
		if o.status == "accepted" {
			acked[slot].Store(2) // counted: the certified result must include it
		}
		outcomes[i] = o
		answeredN.Add(1)
		if s.retry {
			return
		}
		depMu.Lock()
		answered[slot] = true
		next := pending[slot]
		delete(pending, slot)
		depMu.Unlock()
		for _, j := range next {
			do(j)
		}
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				do(i)
			}
		}()
	}
	fmt.Printf("night: silence %s, then %d requests over %s as planned\n", broadcast.silence, len(p.sends), broadcast.length)
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	go func() {
		for range progress.C {
			n := answeredN.Load()
			fmt.Printf("night: %s: %d of %d requests answered\n", time.Since(begin).Round(time.Second), n, len(p.sends))
			if n >= int64(len(p.sends)) {
				return
			}
		}
	}()
	for i, s := range p.sends {
		if d := time.Until(begin.Add(s.at)); d > 0 {
			time.Sleep(d)
		}
		work <- i
	}
	close(work)
	wg.Wait()
	loadTook := time.Since(begin)
	busy := map[*region]float64{} // CPU seconds each process spent while the votes came
	for _, r := range cl.all() {
		busy[r] = procUsage(r.cmd.Process.Pid).cpu - cpuBefore[r]
	}
	close(probeDone)
	probeWG.Wait()

	// Close, grace, certification.
	closesAt, graceMs, err := closePoll(urls[0], cl.adminToken, "night")
	if err != nil {
		return err
	}
	due := time.UnixMilli(closesAt + graceMs)
	certifiedAfter := make([]time.Duration, len(urls))
	var cert struct {
		Status string
		Totals map[string]uint64
		Total  uint64
		Digest string
	}
	for i, u := range urls {
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if err := getJSON(u+"/v1/polls/night/result", &cert); err == nil && cert.Status == "reconciled" {
				certifiedAfter[i] = time.Since(due)
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: not certified within 5 minutes (status %q)", names[i], cert.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()

	// What the acknowledgements say the result must be.
	want := map[string]uint64{}
	var wantTotal uint64
	for v := range p.voters {
		switch {
		case acked[2*v+1].Load() >= 1: // ledgered: accepted, or a retry's duplicate
			want[optionIDs[p.options[v][1]]]++
			wantTotal++
		case acked[2*v].Load() >= 1:
			want[optionIDs[p.options[v][0]]]++
			wantTotal++
		}
	}
	report(p, outcomes, loadTook, &vw, &pr, names, certifiedAfter, cl, cert.Totals, cert.Total, want, wantTotal, cert.Digest)
	if edges > 0 {
		if err := besideModel(p, outcomes, loadTook, &vw, int64(nviewers), &pr, certifiedAfter, cl, busy); err != nil {
			fmt.Println("night: no model beside it:", err)
		}
	}
	for _, o := range optionIDs {
		if cert.Totals[o] != want[o] {
			return errors.New("the certified result differs from the acknowledgements")
		}
	}
	return nil
}

func voterIP(i int) string {
	a := i / 4 // four voters an address, as phones behind one home router
	return fmt.Sprintf("10.%d.%d.%d", a>>16&255, a>>8&255, a&255)
}

func report(p *plan, outs []outcome, took time.Duration, vw *viewers, pr *prober, names []string, certified []time.Duration,
	cl *cluster, got map[string]uint64, gotTotal uint64, want map[string]uint64, wantTotal uint64, digest string) {
	statuses := map[string]int{}
	var lat [phases][]time.Duration
	var lags []time.Duration
	perSecond := map[int]int{}
	for i, o := range outs {
		statuses[o.status]++
		lat[o.phase] = append(lat[o.phase], o.lat)
		lags = append(lags, o.lag)
		if !p.sends[i].retry {
			perSecond[int((p.sends[i].at+o.lag).Seconds())]++
		}
	}
	peak, above := 0, 0
	for _, n := range perSecond {
		peak = max(peak, n)
		if n >= 100_000 {
			above++
		}
	}
	fmt.Println()
	fmt.Println("| figure | value |")
	fmt.Println("| --- | --- |")
	fmt.Printf("| requests sent (votes + %d retries) | %d in %.1f s (planned %s) |\n", len(outs)-countNot(p), len(outs), took.Seconds(), broadcast.length)
	keys := slices.Sorted(maps.Keys(statuses))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, statuses[k]))
	}
	fmt.Printf("| answers | %s |\n", strings.Join(parts, ", "))
	if p.peak >= 100_000 {
		fmt.Printf("| votes per second, sent | planned peak %.0f; reached %d in the best second; %d s at or above 100,000 |\n", p.peak, peak, above)
	} else {
		fmt.Printf("| votes per second, sent | planned peak %.0f; reached %d in the best second |\n", p.peak, peak)
	}
	slices.Sort(lags)
	fmt.Printf("| schedule lag (sent after planned) p50 / p99 / max | %s / %s / %s ms |\n", ms(q(lags, 0.5)), ms(q(lags, 0.99)), ms(lags[len(lags)-1]))
	for ph := range phases {
		l := lat[ph]
		slices.Sort(l)
		if len(l) == 0 {
			continue
		}
		fmt.Printf("| ack latency, %s (%d requests) p50 / p99 / p99.9 | %s / %s / %s ms |\n", phaseNames[ph], len(l), ms(q(l, 0.5)), ms(q(l, 0.99)), ms(q(l, 0.999)))
	}
	slices.Sort(pr.lat)
	if len(pr.lat) > 0 {
		fmt.Printf("| vote to viewer, eu-west → ap-south (%d probes, %d not seen in 10 s) p50 / p99 | %s / %s ms |\n", len(pr.lat), pr.lost, ms(q(pr.lat, 0.5)), ms(q(pr.lat, 0.99)))
	}
	fmt.Printf("| viewers: frames read, frames missed, dropped, failed to connect | %d, %d, %d, %d |\n", vw.frames.Load(), vw.missed.Load(), vw.dropped.Load(), vw.failed.Load())
	for i, n := range names {
		fmt.Printf("| close + grace → certified at %s | %s ms |\n", n, ms(certified[i]))
	}
	verdict := "exact ✓"
	for _, o := range optionIDs {
		if got[o] != want[o] {
			verdict = "DIFFERENT ✗"
		}
	}
	fmt.Printf("| certified against the acknowledgements | certified %v total %d; acks say %v total %d: %s (digest %.16s…) |\n", got, gotTotal, want, wantTotal, verdict, digest)
	for i, r := range cl.regions {
		u := procUsage(r.cmd.Process.Pid)
		fmt.Printf("| node %s: CPU seconds, peak RSS | %.1f s, %.0f MB |\n", r.name, u.cpu, u.peakMB)
		if i < len(cl.edges) && len(cl.edges[i]) > 0 {
			var cpu, peak float64
			for _, e := range cl.edges[i] {
				u := procUsage(e.cmd.Process.Pid)
				cpu, peak = cpu+u.cpu, max(peak, u.peakMB)
			}
			fmt.Printf("| %d edge(s) of %s: CPU seconds (all of them), peak RSS (the largest) | %.1f s, %.0f MB |\n", len(cl.edges[i]), r.name, cpu, peak)
		}
	}
	var onSocket int
	for _, o := range outs {
		if o.socket {
			onSocket++
		}
	}
	if onSocket > 0 {
		fmt.Printf("| requests on a viewer's socket at an edge, over HTTP to an edge | %d, %d |\n", onSocket, len(outs)-onSocket)
	}
	u := procUsage(os.Getpid())
	fmt.Printf("| generator and viewers: CPU seconds, peak RSS | %.1f s, %.0f MB |\n", u.cpu, u.peakMB)
}

func countNot(p *plan) int {
	n := 0
	for _, s := range p.sends {
		if s.retry {
			n++
		}
	}
	return len(p.sends) - n
}

func q(d []time.Duration, f float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*f))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

func createPoll(url, token, id string) error {
	body := fmt.Sprintf(`{"id":%q,"question":"Who should win tonight?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":3600,"grace_s":2}`, id)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/polls", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("create poll %s: %d %s", id, res.StatusCode, b)
	}
	return nil
}

func closePoll(url, token, id string) (closesAt, graceMs int64, err error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/polls/"+id+"/close", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	var v struct {
		ClosesAt int64 `json:"closes_at"`
		GraceMs  int64 `json:"grace_ms"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&v) != nil {
		return 0, 0, fmt.Errorf("close %s: %d", id, res.StatusCode)
	}
	return v.ClosesAt, v.GraceMs, nil
}

func getJSON(url string, v any) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d", url, res.StatusCode)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// waitEverywhere waits until every region answers 200 on every path.
func waitEverywhere(urls []string, paths ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range urls {
		for _, path := range paths {
			for {
				res, err := http.Get(u + path)
				if err == nil {
					res.Body.Close()
					if res.StatusCode == 200 {
						break
					}
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s%s: not there within 30 s", u, path)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}
