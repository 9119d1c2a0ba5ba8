package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"tally/api"
	"tally/internal/testwait"
	"tally/ledger"
)

// TestFaultsThroughEdges is the fault-injection run of issue 45 (items 2
// and 3), and the two-copy rule's process test (issue 48): voters vote
// and change their minds through two edges (and two directly at a full
// node), sending
// each answer's stamp back as "after" and retrying 504 outcome_unknown
// with the same key, while the region's full nodes are stopped together
// (SIGSTOP, 3 s), one is stopped alone, and one is killed with SIGKILL and
// restarted, and last one is destroyed: killed with SIGKILL and its data
// directory deleted, never to return. Every full node runs with
// --ack-copies 2, so the destroyed node's acknowledged votes are on its
// buddy. Then, against the ledgers of every full node (the destroyed
// one's read from its buddy's copy):
//   - a key answered with a refusal (503 or any 4xx) is in no ledger;
//   - an acknowledged key is, and every full node and edge answers its
//     retry with the id of the record that counts (the earliest under the
//     key), after the close too;
//   - the certificate counts each voter's last acknowledged vote, without
//     --accept-lost, says it read the destroyed replica from a copy, and
//     an auditor reproduces its digest from the exports and the copy's.
//
// It prints how many answers were 504 outcome_unknown and how they ended.
func TestFaultsThroughEdges(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	et := startEdgeTierCopies(t, 2)
	et.us.createPollFor(t, "p", 3600)
	et.seePoll(t, "p")

	run := &faultRun{edges: []string{et.edges[0].url, et.edges[1].url}, keys: map[string]*keyFate{}, byPhase: map[string]*phaseCount{}}
	run.phase.Store("steady")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const voters = 24
	for v := range voters {
		wg.Go(func() { run.voter(fmt.Sprintf("v%02d", v), run.edges, stop) })
	}
	// Two voters vote at the full node that survives, directly: frozen, it
	// answers once it resumes.
	for v := range 2 {
		wg.Go(func() { run.voter(fmt.Sprintf("d%02d", v), []string{et.full[1].url}, stop) })
	}
	signal := func(p *procNode, sig syscall.Signal) {
		t.Helper()
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatalf("signal %v: %v", sig, err)
		}
	}
	pause := func(d time.Duration) { <-time.After(d) } // the faults' own schedule, not a wait for a condition
	pause(2 * time.Second)
	run.phase.Store("both full nodes of the region stopped 3 s")
	signal(et.full[0], syscall.SIGSTOP) // the region's full nodes freeze together
	signal(et.full[1], syscall.SIGSTOP)
	pause(3 * time.Second)
	signal(et.full[0], syscall.SIGCONT)
	signal(et.full[1], syscall.SIGCONT)
	pause(time.Second)
	run.phase.Store("steady")
	pause(time.Second)
	run.phase.Store("one full node stopped 3 s")
	signal(et.full[1], syscall.SIGSTOP) // one alone, mid-commit as it happens
	pause(3 * time.Second)
	signal(et.full[1], syscall.SIGCONT)
	pause(time.Second)
	run.phase.Store("steady")
	pause(time.Second)
	run.phase.Store("one full node killed (SIGKILL) and restarted")
	signal(et.full[0], syscall.SIGKILL)
	et.full[0].cmd.Wait()
	et.full[0] = startProcess(t, et.bin, et.fullDirs[0], et.fullFlags[0]...)
	pause(time.Second)
	run.phase.Store("steady")
	pause(time.Second)
	// The restarted node is destroyed: since its restart it has copied to
	// its buddy in the region (the other full node), which holds its chain
	// and its ballots. The other's copies went to us-east while the first
	// was down, and it would be the one to lose its last ballots' spread.
	run.phase.Store("one full node destroyed (SIGKILL, its data directory deleted)")
	destroyed := et.destroy(t, 0)
	pause(2 * time.Second)
	run.phase.Store("steady")
	pause(time.Second)
	close(stop)
	wg.Wait()

	// Every answer settled, the ballots spread: close and certify.
	if r := et.us.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	var cert api.ResultView
	testwait.For(t, 60*time.Second, "the certificate", func() bool {
		r := et.us.call(t, "GET", "/v1/polls/p/result", "")
		return json.Unmarshal([]byte(r.raw), &cert) == nil && cert.Status == "reconciled"
	})

	// The ledgers of every full node: the earliest record of each key.
	// The destroyed one's is its buddy's copy, which the certificate names.
	var fromCopy struct {
		Detail struct {
			FromCopy []struct{ Replica, Holder string } `json:"from_copy"`
		}
	}
	json.Unmarshal([]byte(et.us.call(t, "GET", "/v1/polls/p/result", "").raw), &fromCopy)
	// A live node that memberlist dropped for a moment under the load
	// (suspected, then back) may be read from its copy too: its copy holds
	// every record it acknowledged, and the exports below say the same.
	urls := map[string]string{et.us.replica: et.us.url, et.replicaOf(t, 1): et.full[1].url}
	exports := [][2]string{{et.us.url, "/v1/polls/p/ledger"}, {et.full[1].url, "/v1/polls/p/ledger"}}
	sawDestroyed := false
	for _, c := range fromCopy.Detail.FromCopy {
		sawDestroyed = sawDestroyed || c.Replica == destroyed
		exports = append(exports, [2]string{urls[c.Holder], "/v1/polls/p/ledger?copy_of=" + c.Replica})
	}
	if !sawDestroyed {
		t.Fatalf("the certificate's from_copy is %+v, want the destroyed replica %s among them", fromCopy.Detail.FromCopy, destroyed)
	}
	auditExports(t, et, exports)
	counts := map[string]*ledger.Record{}
	for _, at := range exports {
		for _, r := range ledgerAt(t, at[0], at[1]) {
			if first, ok := counts[r.Idem]; !ok || first.After(&r) {
				counts[r.Idem] = &r
			}
		}
	}
	run.report(t)
	want := map[string]uint64{}
	for key, f := range run.keys {
		rec, ledgered := counts[key]
		switch f.final {
		case fateRefused:
			if ledgered {
				t.Errorf("key %s was refused (%s) but is ledgered as %s/%d", key, f.answer, rec.Replica, rec.Seq)
			}
		case fateAcked:
			if !ledgered {
				t.Errorf("key %s was acknowledged (%s) but is in no ledger", key, f.answer)
			}
		}
	}
	// Each voter's last acknowledged vote counts: the certificate's totals
	// (unless a vote's outcome stayed unknown, which the voter cannot order).
	for _, last := range run.lastAcked {
		want[last]++
	}
	for _, option := range []string{"a", "b", "c"} {
		if cert.Totals[option] != want[option] && run.unknownLast == 0 {
			t.Errorf("certified %v, want each voter's last acknowledged vote: %v", cert.Totals, want)
			explainVoters(t, run, exports)
			break
		}
	}
	// One key, one id: every node and edge answers a retry of an
	// acknowledged key with the record that counts, after the close.
	// A key whose record is the destroyed replica's is reported, not
	// checked: a survivor knows it only if the destroyed node's gossip, or
	// its copy, reached that survivor before it died — under this load a
	// copy may have gone to us-east while the other was set aside, and a
	// survivor then takes the retry as new (counted once all the same:
	// the certificate keeps the earliest record). docs/operations.md,
	// "Two machines", says so.
	places := []string{et.us.url, et.full[1].url, et.edges[0].url, et.edges[1].url}
	checked, ofDestroyed, otherID := 0, 0, 0
	for key, f := range run.keys {
		rec, ok := counts[key]
		if f.final != fateAcked || !ok || checked >= 60 {
			continue
		}
		checked++
		id := rec.Replica + "/" + strconv.FormatUint(rec.Seq, 10)
		if rec.Replica == destroyed {
			ofDestroyed++
		}
		for _, url := range places {
			// As a client does: an answer of 503 or 504 outcome_unknown
			// (the machine is loaded; a full node did not answer in time)
			// is sent again with the same key, a few times.
			code, body, err := post(url+"/v1/polls/p/votes", f.body)
			for try := 0; try < 5 && err == nil && (code == http.StatusGatewayTimeout || code == http.StatusServiceUnavailable); try++ {
				code, body, err = post(url+"/v1/polls/p/votes", f.body)
			}
			var res api.VoteResponse
			json.Unmarshal(body, &res)
			switch {
			case err == nil && code == http.StatusOK && len(res.Results) == 1 && res.Results[0].Status == "duplicate" && res.Results[0].VoteID == id:
			case rec.Replica == destroyed:
				otherID++
			default:
				t.Errorf("a retry of %s at %s: %d %s, want duplicate %s", key, url, code, body, id)
			}
		}
	}
	t.Logf("retries after the close: %d keys at %d places; of the %d keys whose record is the destroyed replica's, %d answers named another id or refused",
		checked, len(places), ofDestroyed, otherID)
}

// The fate of one key, as its voter saw it.
const (
	fateAcked   = "acked"   // accepted or duplicate: it counts (once)
	fateRefused = "refused" // 503 or 4xx: nothing of it was taken
	fateUnknown = "unknown" // still 504 when the voter gave up
)

type keyFate struct {
	body   string
	final  string
	answer string
}

// faultRun is the voters' side of TestFaultsThroughEdges.
type faultRun struct {
	edges []string
	phase atomic.Value // string: the fault going on as a vote is sent

	mu                            sync.Mutex
	keys                          map[string]*keyFate
	lastAcked                     map[string]string // voter → option of their last acknowledged vote
	requests, unknown, resolved   int
	refused, unknownLast, retries int
	byPhase                       map[string]*phaseCount
}

// phaseCount is what the keys first sent during one phase of the faults
// were answered.
type phaseCount struct{ keys, unknown, refused int }

func (r *faultRun) count(phase string, f func(*phaseCount)) {
	c := r.byPhase[phase]
	if c == nil {
		c = &phaseCount{}
		r.byPhase[phase] = c
	}
	f(c)
}

// voter votes until stop, one vote at a time, as our clients do: the
// newest stamp goes back as "after", a 504 is sent again (the same bytes)
// until a definitive answer, and a refused key is never sent again.
func (r *faultRun) voter(id string, targets []string, stop <-chan struct{}) {
	stamp := ""
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+rand.IntN(60)) * time.Millisecond): // a voter's pace
		}
		key := fmt.Sprintf("%s-%d", id, i)
		option := []string{"a", "b", "c"}[rand.IntN(3)]
		b, _ := json.Marshal(api.Vote{Option: option, Voter: id, Idem: key, After: stamp})
		f := &keyFate{body: string(b)}
		phase := r.phase.Load().(string)
		r.mu.Lock()
		r.keys[key] = f
		r.count(phase, func(c *phaseCount) { c.keys++ })
		r.mu.Unlock()
		deadline := time.Now().Add(20 * time.Second)
		sawUnknown := false
		for {
			code, body, err := post(targets[rand.IntN(len(targets))]+"/v1/polls/p/votes", f.body)
			r.mu.Lock()
			r.requests++
			r.mu.Unlock()
			var res api.VoteResponse
			var e api.ErrorBody
			json.Unmarshal(body, &res)
			json.Unmarshal(body, &e)
			switch {
			case err == nil && code == http.StatusOK && len(res.Results) == 1 && (res.Results[0].Status == "accepted" || res.Results[0].Status == "duplicate"):
				f.final, f.answer = fateAcked, res.Results[0].Status+" "+res.Results[0].VoteID
				stamp = api.LaterStamp(stamp, res.Results[0].Stamp)
				r.mu.Lock()
				if r.lastAcked == nil {
					r.lastAcked = map[string]string{}
				}
				r.lastAcked[id] = option
				if sawUnknown {
					r.resolved++
				}
				r.mu.Unlock()
			case err == nil && time.Now().Before(deadline) && (code == http.StatusGatewayTimeout && e.Error.Code == api.CodeOutcomeUnknown ||
				sawUnknown && code == http.StatusServiceUnavailable):
				// After an unknown outcome a 503 is not definitive either (the
				// node answering may not know what another did with the
				// first try): waited out the same way, as our clients do.
				r.mu.Lock()
				r.retries++
				if !sawUnknown {
					r.unknown++
					r.count(phase, func(c *phaseCount) { c.unknown++ })
				}
				r.mu.Unlock()
				sawUnknown = true
				<-time.After(time.Second) // Retry-After
				continue
			case err == nil && (code == http.StatusGatewayTimeout || sawUnknown && code == http.StatusServiceUnavailable):
				f.final, f.answer = fateUnknown, string(body)
				r.mu.Lock()
				r.unknownLast++ // what counts for this voter is not known: the totals are not checked
				r.mu.Unlock()
			default:
				f.final, f.answer = fateRefused, fmt.Sprintf("%d %s %v", code, bytes.TrimSpace(body), err)
				r.mu.Lock()
				r.refused++
				r.count(phase, func(c *phaseCount) { c.refused++ })
				r.mu.Unlock()
			}
			break
		}
	}
}

func (r *faultRun) report(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acked := 0
	for _, f := range r.keys {
		if f.final == fateAcked {
			acked++
		}
	}
	t.Logf("faults through edges: %d keys (%d acknowledged, %d refused), %d requests; %d keys answered 504 outcome_unknown (%d resends), %d resolved by a retry, %d still unknown",
		len(r.keys), acked, r.refused, r.requests, r.unknown, r.retries, r.resolved, r.unknownLast)
	for phase, c := range r.byPhase {
		t.Logf("  %s: %d keys, %d answered 504 outcome_unknown (%.1f%%), %d refused", phase, c.keys, c.unknown, 100*float64(c.unknown)/float64(max(c.keys, 1)), c.refused)
	}
	if os.Getenv("TALLY_FAULTS_JSON") != "" {
		fmt.Printf(`{"keys":%d,"acked":%d,"refused":%d,"requests":%d,"unknown":%d,"resends":%d,"resolved":%d,"still_unknown":%d}`+"\n",
			len(r.keys), acked, r.refused, r.requests, r.unknown, r.retries, r.resolved, r.unknownLast)
	}
}

// ledgerAt reads the records of a node's ledger export at path
// (/v1/polls/{poll}/ledger, or a buddy's copy: …?copy_of=REPLICA).
func ledgerAt(t *testing.T, url, path string) []ledger.Record {
	t.Helper()
	res := adminGet(t, url, path)
	defer res.Body.Close()
	var out []ledger.Record
	for r, err := range ledger.ReadExport(res.Body, ledger.ExportHooks{}) {
		if err != nil {
			t.Fatalf("the ledger export of %s: %v", url, err)
		}
		out = append(out, r)
	}
	return out
}

// auditExports reproduces the certified digest of poll "p" as an auditor
// does, from the exports (a node's URL and path each: the live nodes'
// ledgers and the holders' copies of the replicas certified from a copy;
// docs/certification.md, "From a copy").
func auditExports(t *testing.T, et *edgeTier, exports [][2]string) {
	t.Helper()
	r := et.us.call(t, "GET", "/v1/polls/p/result", "")
	var streams []iter.Seq2[ledger.Record, error]
	for _, at := range exports {
		res := adminGet(t, at[0], at[1])
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		streams = append(streams, ledger.ReadNDJSON(bytes.NewReader(b)))
	}
	def, _ := et.us.state.Defs.Poll("p")
	floor := 0.0 // the processes' --trust-floor; the auditor uses the certifier's (tally ledger merge --trust-floor)
	if d, _ := r.body["detail"].(map[string]any); d != nil && d["coordinator"] == et.us.cfg.NodeName {
		floor = et.us.cfg.TrustFloor
	}
	offline, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "p", ClosesAt: def.ClosesAt, CloseRule: ledger.CloseByNode, TrustFloor: floor}, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if digest, _ := r.body["digest"].(string); offline.Digest != digest || digest == "" {
		t.Fatalf("the exports and the copies reconcile to digest %s, the certificate says %q", offline.Digest, digest)
	}
}

// explainVoters logs, for each voter whose latest standing record is not
// the option of their last acknowledged vote, every record of theirs and
// what each of their keys was answered: what a failure needs to be read.
func explainVoters(t *testing.T, run *faultRun, exports [][2]string) {
	t.Helper()
	byVoter := map[string][]ledger.Record{}
	for _, at := range exports {
		for _, r := range ledgerAt(t, at[0], at[1]) {
			byVoter[r.Voter] = append(byVoter[r.Voter], r)
		}
	}
	for voter, last := range run.lastAcked {
		recs := byVoter[voter]
		slices.SortFunc(recs, func(a, b ledger.Record) int {
			if a.After(&b) {
				return 1
			}
			if b.After(&a) {
				return -1
			}
			return 0
		})
		first := map[string]bool{}
		latest := ""
		for _, r := range recs {
			if !first[r.Idem] {
				first[r.Idem] = true
				if r.Counted && !r.Late {
					latest = r.Option
				}
			}
		}
		if latest == last {
			continue
		}
		t.Logf("voter %s: last acknowledged %s, latest standing record %s", voter, last, latest)
		for _, r := range recs {
			f := run.keys[r.Idem]
			answer := ""
			if f != nil {
				answer = f.final + " " + f.answer
			}
			t.Logf("  %s %s/%d %d.%d %s counted=%t late=%t  answered: %s", r.Idem, r.Replica, r.Seq, r.Wall, r.Logical, r.Option, r.Counted, r.Late, answer)
		}
	}
}
