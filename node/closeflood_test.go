package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"tally/api"
)

// floodAnswer is one vote's answer in the close flood: its status, and
// whether it was sent after the close was answered.
type floodAnswer struct {
	status     string
	afterClose bool
	at         time.Time
}

// TestCloseFloodEveryAcceptedIsCertified is issue 59's close at process
// level: three regions, four clients a region voting as fast as they are
// answered (each voter once, for its region's own option, so that
// option's certified total is exactly what its region counted), the poll
// closed "now" at one region in the middle of the flood and the flood
// going on after it. Each round closes at another region. It holds that
// every vote answered "accepted" anywhere is in the certificate (the
// option's certified total equals its region's accepted answers), and
// that no vote sent after the close's answer is accepted by a region the
// answer says confirmed the close. It logs, per region, the accepted and
// certified votes and the last "accepted" relative to the close's answer
// (BENCHMARKS.md, "The close").
//
// Rounds: TALLY_CLOSE_ROUNDS (default 3).
func TestCloseFloodEveryAcceptedIsCertified(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs three node binaries")
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("TALLY_CLOSE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	bin := buildNodeBinary(t)
	nodes := startThreeRegions(t, bin)
	replicas := make([]string, len(nodes))
	waitFor(t, func() bool {
		for i, n := range nodes {
			var c api.ClusterView
			if getJSON(n.p.url+"/v1/cluster", &c) != 200 || len(c.Members) != 3 {
				return false
			}
			for _, m := range c.Members {
				if m.Self {
					replicas[i] = m.Replica
				}
			}
		}
		return true
	})
	options := []string{"eu", "us", "ap"}
	for round := range rounds {
		closer := round % len(nodes)
		id := fmt.Sprintf("flood%d", round)
		code, body, err := post(nodes[0].p.url+"/v1/polls", `{"id":"`+id+`","question":"Which?","options":[{"id":"eu","label":"EU"},{"id":"us","label":"US"},{"id":"ap","label":"AP"}],"duration_s":600,"grace_s":1}`,
			"Authorization", "Bearer "+testToken)
		if err != nil || code != http.StatusCreated {
			t.Fatalf("create %s: %d %s %v", id, code, body, err)
		}
		for _, n := range nodes {
			waitFor(t, func() bool { return getJSON(n.p.url+"/v1/polls/"+id, &struct{}{}) == 200 })
		}
		answers, report, closed := closeInFlood(t, nodes, closer, id, options)
		certified := waitCertified(t, nodes, id)
		confirmed := map[string]bool{}
		for _, r := range report.Confirmed {
			confirmed[r] = true
		}
		for i := range nodes {
			accepted, lateAfter, last := 0, 0, time.Duration(-1<<62)
			for _, a := range answers[i] {
				switch a.status {
				case "accepted":
					accepted++
					last = max(last, a.at.Sub(closed))
					if a.afterClose && confirmed[replicas[i]] {
						lateAfter++
					}
				}
			}
			got := certified.Totals[options[i]]
			t.Logf("round %d (close at %s): %s accepted %d, certified %d; last accepted %v after the close's answer; close took %.1f ms, unconfirmed %v",
				round, options[closer], options[i], accepted, got, last.Round(time.Microsecond), report.TookMs, report.Unconfirmed)
			if uint64(accepted) != got {
				t.Errorf("round %d: %s answered %d votes accepted, the certificate counts %d of its option", round, options[i], accepted, got)
			}
			if lateAfter > 0 {
				t.Errorf("round %d: %s accepted %d votes sent after the close was answered, though it confirmed the close", round, options[i], lateAfter)
			}
		}
	}
}

// closeInFlood runs the flood at every region, closes the poll at
// nodes[closer] in its middle, and returns each region's answers, the
// close's report and when its answer came.
func closeInFlood(t *testing.T, nodes []*regionProc, closer int, id string, options []string) ([][]floodAnswer, api.CloseReport, time.Time) {
	t.Helper()
	const clients = 4
	var (
		mu       sync.Mutex
		closedAt time.Time // zero until the close is answered
		answers  = make([][]floodAnswer, len(nodes))
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(30 * time.Second) // bounds the loop whatever happens
	for i, n := range nodes {
		for c := range clients {
			wg.Go(func() {
				for v := 0; time.Now().Before(deadline); v++ {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					after := !closedAt.IsZero()
					mu.Unlock()
					key := fmt.Sprintf("%s-%d-%d-%d", id, i, c, v)
					code, body, err := post(n.p.url+"/v1/polls/"+id+"/votes", vote(options[i], key, key))
					a := floodAnswer{afterClose: after, at: time.Now(), status: fmt.Sprintf("http %d", code)}
					if err == nil && code == http.StatusOK {
						var r api.VoteResponse
						if json.Unmarshal(body, &r) == nil && len(r.Results) == 1 {
							a.status = r.Results[0].Status
						}
					}
					mu.Lock()
					answers[i] = append(answers[i], a)
					mu.Unlock()
				}
			})
		}
	}
	// The close, in the middle of the flood (this schedules it; no
	// outcome waits on it).
	time.Sleep(1500 * time.Millisecond)
	code, body, err := post(nodes[closer].p.url+"/v1/polls/"+id+"/close", "", "Authorization", "Bearer "+testToken)
	answered := time.Now()
	mu.Lock()
	closedAt = answered
	mu.Unlock()
	if err != nil || code != 200 {
		close(stop)
		wg.Wait()
		t.Fatalf("close %s: %d %s %v", id, code, body, err)
	}
	var v struct {
		Close *api.CloseReport `json:"close"`
	}
	json.Unmarshal(body, &v)
	report := api.CloseReport{}
	if v.Close != nil {
		report = *v.Close
	}
	time.Sleep(time.Second) // the flood goes on after the close
	close(stop)
	wg.Wait()
	return answers, report, answered
}

// waitCertified waits until every node serves the poll's reconciled
// result, and returns it.
func waitCertified(t *testing.T, nodes []*regionProc, id string) api.ResultView {
	t.Helper()
	var res api.ResultView
	waitFor(t, func() bool {
		for _, n := range nodes {
			if getJSON(n.p.url+"/v1/polls/"+id+"/result", &res) != 200 || res.Status != "reconciled" {
				return false
			}
		}
		return true
	})
	return res
}
