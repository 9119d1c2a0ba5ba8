package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tally/api"
)

// serveView is a fake node whose GET /v1/cluster answers v; it counts
// the requests that carried an Authorization header in *authed.
func serveView(t *testing.T, v api.ClusterView, authed *atomic.Int32) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster" {
			http.NotFound(w, r)
			return
		}
		if authed != nil && r.Header.Get("Authorization") != "" {
			authed.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(s.Close)
	return s
}

func hostPort(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

// edgeCluster is a full node of eu-west whose member list holds four
// edges: eu-west's, failed over to ap-south; us-east's, at home; one
// that does not answer; one whose HTTP address is a public port.
func edgeCluster(t *testing.T, authed *atomic.Int32) (full, public *httptest.Server) {
	apFull := api.ClusterTarget{Node: "ap-full-1", Replica: "r-ap", Region: "ap-south"}
	usFull := api.ClusterTarget{Node: "us-full-1", Replica: "r-us", Region: "us-east"}
	euEdge := serveView(t, api.ClusterView{Self: "edge-eu-1", Region: "eu-west", Role: "edge",
		RelaysTo: []api.ClusterTarget{apFull, {Node: "ap-full-2", Replica: "r-ap2", Region: "ap-south"}},
		NATS:     &api.ClusterNATS{Connected: true, LeafNodes: 1, LeafHub: &apFull}}, authed)
	usEdge := serveView(t, api.ClusterView{Self: "edge-us-1", Region: "us-east", Role: "edge",
		RelaysTo: []api.ClusterTarget{usFull}, NATS: &api.ClusterNATS{Connected: true, LeafNodes: 1, LeafHub: &usFull}}, authed)
	public = serveView(t, api.ClusterView{Region: "ap-south", Regions: map[string]int64{"ap-south": 0}}, authed)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now: refused
	full = serveView(t, api.ClusterView{Self: "eu-full-1", Region: "eu-west", Replica: "r-eu", Role: "full",
		Regions: map[string]int64{"eu-west": 0, "us-east": 120, "ap-south": 200},
		NATS:    &api.ClusterNATS{Connected: true, Embedded: true, LeafNodes: 0, Gateways: []string{"us-east", "ap-south"}},
		Members: []api.ClusterMember{
			{Name: "eu-full-1", Region: "eu-west", Replica: "r-eu", Role: "full", HTTPAddr: "127.0.0.1:1", State: "alive", Self: true},
			{Name: "edge-eu-1", Region: "eu-west", Role: "edge", HTTPAddr: hostPort(euEdge), State: "alive"},
			{Name: "edge-us-1", Region: "us-east", Role: "edge", HTTPAddr: hostPort(usEdge), State: "alive"},
			{Name: "edge-gone", Region: "eu-west", Role: "edge", HTTPAddr: dead, State: "alive"},
			{Name: "edge-ap-1", Region: "ap-south", Role: "edge", HTTPAddr: hostPort(public), State: "alive"},
		}}, nil)
	return full, public
}

// tally cluster names, for each edge, the full node it relays to (its own
// region's or, failed over, another's) and its leaf hub, as the edge
// answers; an edge that does not answer, or answers from a public port,
// says so in its row. The admin token is not sent to the edges.
func TestClusterEdges(t *testing.T) {
	t.Setenv("TALLY_ADMIN_URL", "")
	t.Setenv("TALLY_TOKEN", "tok")
	var authed atomic.Int32
	full, public := edgeCluster(t, &authed)

	out, stderr, code := runCLI(t, "cluster", "--admin-url", full.URL)
	if code != 0 || stderr != "" {
		t.Fatalf("cluster: %d %q", code, stderr)
	}
	for _, want := range []string{
		`(?m)^EDGE\s+REGION\s+RELAYS TO\s+RELAY\s+LEAF HUB$`,
		`(?m)^edge-eu-1\s+eu-west\s+ap-full-1 \(r-ap, ap-south\) \+1 more\s+failed over to ap-south\s+ap-full-1 \(ap-south, not its region\)$`,
		`(?m)^edge-us-1\s+us-east\s+us-full-1 \(r-us, us-east\)\s+its own region\s+us-full-1 \(us-east\)$`,
		`(?m)^edge-gone\s+eu-west\s+unreachable: .*127\.0\.0\.1`,
		`(?m)^edge-ap-1\s+ap-south\s+not shown: .* is its public port .*--edge-admin-port PORT or --edge-admin edge-ap-1=URL$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	if i := strings.Index(out, "\nEDGE"); i < 0 || strings.Count(strings.TrimSpace(out[i:]), "\n") != 4 {
		t.Errorf("the edges section is not one row per edge (4, no full node):\n%s", out)
	}
	if n := authed.Load(); n != 0 {
		t.Errorf("%d edge requests carried the admin token", n)
	}

	out, _, code = runCLI(t, "cluster", "--admin-url", full.URL, "--json")
	var rep clusterReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("cluster --json: %d %v %s", code, err, out)
	}
	if rep.Self != "eu-full-1" || len(rep.Members) != 5 || len(rep.Edges) != 4 {
		t.Fatalf("cluster --json: self %q, %d members, %d edges: %s", rep.Self, len(rep.Members), len(rep.Edges), out)
	}
	eu, us, gone, ap := rep.Edges[0], rep.Edges[1], rep.Edges[2], rep.Edges[3]
	if eu.Name != "edge-eu-1" || eu.Relay != relayFailedOver || len(eu.RelaysTo) != 2 || eu.RelaysTo[0].Region != "ap-south" ||
		eu.LeafHub == nil || eu.LeafHub.Node != "ap-full-1" || eu.Error != "" {
		t.Errorf("eu-west's edge: %+v", eu)
	}
	if us.Name != "edge-us-1" || us.Relay != relayOwnRegion || us.LeafHub == nil || us.LeafHub.Region != "us-east" {
		t.Errorf("us-east's edge: %+v", us)
	}
	if gone.Relay != "" || !strings.HasPrefix(gone.Error, "unreachable: ") || gone.RelaysTo != nil {
		t.Errorf("the unreachable edge: %+v", gone)
	}
	if ap.Relay != "" || !strings.Contains(ap.Error, "public port") || ap.URL != public.URL {
		t.Errorf("the edge asked at its public port: %+v", ap)
	}
	var raw map[string]any
	if json.Unmarshal([]byte(out), &raw) != nil || raw["edges"] == nil || raw["members"] == nil {
		t.Errorf("cluster --json: no edges or members at the top level: %s", out)
	}
}

// Where the edges' admin addresses are given, they are asked there:
// --edge-admin NAME=URL for one, --edge-admin-port for all (on the host
// of each one's HTTP address); a node answering under another name is
// not taken for the edge.
func TestClusterEdgeAdmin(t *testing.T) {
	t.Setenv("TALLY_ADMIN_URL", "")
	full, _ := edgeCluster(t, nil)
	hub := api.ClusterTarget{Node: "ap-full-1", Replica: "r-ap", Region: "ap-south"}
	admin := serveView(t, api.ClusterView{Self: "edge-ap-1", Region: "ap-south", Role: "edge",
		RelaysTo: []api.ClusterTarget{hub}, NATS: &api.ClusterNATS{LeafHub: &hub}}, nil)
	apRow := regexp.MustCompile(`(?m)^edge-ap-1\s+ap-south\s+ap-full-1 \(r-ap, ap-south\)\s+its own region\s+ap-full-1 \(ap-south\)$`)

	out, stderr, code := runCLI(t, "cluster", "--admin-url", full.URL, "--edge-admin", "edge-ap-1="+admin.URL)
	if code != 0 || !apRow.MatchString(out) || !regexp.MustCompile(`(?m)^edge-eu-1\s+eu-west\s+.*failed over to ap-south`).MatchString(out) {
		t.Errorf("--edge-admin: %d %q\n%s", code, stderr, out)
	}
	_, port, _ := net.SplitHostPort(hostPort(admin))
	out, stderr, code = runCLI(t, "cluster", "--admin-url", full.URL, "--edge-admin-port", port)
	if code != 0 || !apRow.MatchString(out) || !regexp.MustCompile(`(?m)^edge-eu-1\s+eu-west\s+not shown: http://127\.0\.0\.1:`+port+` answered as "edge-ap-1", not edge-eu-1$`).MatchString(out) {
		t.Errorf("--edge-admin-port: %d %q\n%s", code, stderr, out)
	}
	for _, args := range [][]string{{"--edge-admin", "edge-ap-1"}, {"--edge-admin", "=http://x"}, {"--edge-admin-port", "70000"}, {"--edge-admin-port", "-1"}} {
		if _, stderr, code := runCLI(t, append([]string{"cluster", "--admin-url", full.URL}, args...)...); code != 2 || stderr == "" {
			t.Errorf("cluster %s: %d %q; want 2 and a reason", strings.Join(args, " "), code, stderr)
		}
	}
}

// The edges are asked at once, a bounded number at a time, and one that
// does not answer is given up on after the timeout.
func TestAskEdgesTimeout(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
	v := api.ClusterView{Self: "eu-full-1", Region: "eu-west"}
	for i := range 2 * edgeParallel {
		v.Members = append(v.Members, api.ClusterMember{Name: "edge-" + strconv.Itoa(i), Region: "eu-west", Role: "edge", HTTPAddr: hostPort(hang)})
	}
	const timeout = 200 * time.Millisecond
	start := time.Now()
	got := askEdges(context.Background(), v, edgeAddrs{}, timeout)
	took := time.Since(start)
	if len(got) != 2*edgeParallel {
		t.Fatalf("%d edges reported, want %d", len(got), 2*edgeParallel)
	}
	for _, e := range got {
		if !strings.HasPrefix(e.Error, "unreachable: ") {
			t.Errorf("%s: %q, want unreachable", e.Name, e.Error)
		}
	}
	// Two rounds of edgeParallel; one at a time would be 16 timeouts.
	if took < 2*timeout || took > 10*timeout {
		t.Errorf("asking %d hanging edges took %v; want about %v", len(got), took, 2*timeout)
	}
}

// Edges that announce their admin address (admin_addr) are asked there
// with no flag: their public ports are never asked; one that does not
// answer there says it was its announced address; an edge without
// --admin-addr (none announced) is asked at its HTTP address, whole there.
// --edge-admin NAME=URL, then --edge-admin-port, win over the announced
// address.
func TestClusterEdgesAtAnnouncedAdmin(t *testing.T) {
	t.Setenv("TALLY_ADMIN_URL", "")
	t.Setenv("TALLY_TOKEN", "tok")
	apFull := api.ClusterTarget{Node: "ap-full-1", Replica: "r-ap", Region: "ap-south"}
	euFull := api.ClusterTarget{Node: "eu-full-1", Replica: "r-eu", Region: "eu-west"}
	var authed atomic.Int32
	euAdmin := serveView(t, api.ClusterView{Self: "edge-eu-1", Region: "eu-west", Role: "edge",
		RelaysTo: []api.ClusterTarget{euFull}, NATS: &api.ClusterNATS{Connected: true, LeafNodes: 1, LeafHub: &euFull}}, &authed)
	apAdmin := serveView(t, api.ClusterView{Self: "edge-ap-1", Region: "ap-south", Role: "edge",
		RelaysTo: []api.ClusterTarget{apFull}, NATS: &api.ClusterNATS{Connected: true, LeafNodes: 1, LeafHub: &apFull}}, &authed)
	plain := serveView(t, api.ClusterView{Self: "edge-plain", Region: "eu-west", Role: "edge",
		RelaysTo: []api.ClusterTarget{apFull}, NATS: &api.ClusterNATS{Connected: true, LeafNodes: 1, LeafHub: &apFull}}, &authed)
	var publicAsked atomic.Int32
	publicView := serveView(t, api.ClusterView{Region: "eu-west", Regions: map[string]int64{"eu-west": 0}}, nil)
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		publicAsked.Add(1)
		publicView.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(public.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	full := serveView(t, api.ClusterView{Self: "eu-full-1", Region: "eu-west", Replica: "r-eu", Role: "full",
		Regions: map[string]int64{"eu-west": 0, "ap-south": 200},
		Members: []api.ClusterMember{
			{Name: "eu-full-1", Region: "eu-west", Replica: "r-eu", Role: "full", HTTPAddr: "127.0.0.1:1", AdminAddr: "127.0.0.1:2", State: "alive", Self: true},
			{Name: "edge-eu-1", Region: "eu-west", Role: "edge", HTTPAddr: hostPort(public), AdminAddr: hostPort(euAdmin), Protocol: 2, Release: "v0.5.0", State: "alive"},
			{Name: "edge-ap-1", Region: "ap-south", Role: "edge", HTTPAddr: hostPort(public), AdminAddr: hostPort(apAdmin), State: "alive"},
			{Name: "edge-gone", Region: "eu-west", Role: "edge", HTTPAddr: hostPort(public), AdminAddr: dead, State: "alive"},
			{Name: "edge-plain", Region: "eu-west", Role: "edge", HTTPAddr: hostPort(plain), State: "alive"},
		}}, nil)

	out, stderr, code := runCLI(t, "cluster", "--admin-url", full.URL)
	if code != 0 || stderr != "" {
		t.Fatalf("cluster: %d %q", code, stderr)
	}
	euRow := `(?m)^edge-eu-1\s+eu-west\s+eu-full-1 \(r-eu, eu-west\)\s+its own region\s+eu-full-1 \(eu-west\)$`
	apRow := `(?m)^edge-ap-1\s+ap-south\s+ap-full-1 \(r-ap, ap-south\)\s+its own region\s+ap-full-1 \(ap-south\)$`
	for _, want := range []string{
		euRow, apRow,
		`(?m)^edge-gone\s+eu-west\s+unreachable: .*` + regexp.QuoteMeta(dead) + `.*\(at the admin address it announces; .*--edge-admin edge-gone=URL\)$`,
		`(?m)^edge-plain\s+eu-west\s+ap-full-1 \(r-ap, ap-south\)\s+failed over to ap-south\s+ap-full-1 \(ap-south, not its region\)$`,
		`(?m)^MEMBER\s+REGION\s+REPLICA\s+ROLE\s+STATE\s+RELEASE\s+GOSSIP\s+HTTP\s+ADMIN$`,
		`(?m)^edge-eu-1\s+eu-west\s+edge\s+alive\s+v0\.5\.0 \(protocol 2\)\s+` + regexp.QuoteMeta(hostPort(public)) + `\s+` + regexp.QuoteMeta(hostPort(euAdmin)) + `$`,
		`(?m)^edge-plain\s+eu-west\s+edge\s+alive\s+-\s+` + regexp.QuoteMeta(hostPort(plain)) + `\s+-$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, "not shown") || publicAsked.Load() != 0 || authed.Load() != 0 {
		t.Errorf("public ports asked %d times, the admin token sent %d times:\n%s", publicAsked.Load(), authed.Load(), out)
	}
	out, _, _ = runCLI(t, "cluster", "--admin-url", full.URL, "--json")
	var rep clusterReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Edges) != 4 {
		t.Fatalf("cluster --json: %v %s", err, out)
	}
	if e := rep.Edges[0]; e.URL != euAdmin.URL || e.Relay != relayOwnRegion || rep.Members[1].AdminAddr != hostPort(euAdmin) {
		t.Errorf("cluster --json: edge %+v, member %+v", e, rep.Members[1])
	}

	// --edge-admin NAME=URL wins over the announced address (here another
	// answer of edge-ap-1's: failed over), and --edge-admin-port too (here
	// the public port: each edge's row then names the address it announces).
	moved := serveView(t, api.ClusterView{Self: "edge-ap-1", Region: "ap-south", Role: "edge",
		RelaysTo: []api.ClusterTarget{euFull}, NATS: &api.ClusterNATS{LeafHub: &euFull}}, nil)
	out, _, code = runCLI(t, "cluster", "--admin-url", full.URL, "--edge-admin", "edge-ap-1="+moved.URL)
	if !regexp.MustCompile(`(?m)^edge-ap-1\s+ap-south\s+eu-full-1 \(r-eu, eu-west\)\s+failed over to eu-west`).MatchString(out) || !regexp.MustCompile(euRow).MatchString(out) {
		t.Errorf("--edge-admin over the announced address: %d\n%s", code, out)
	}
	_, port, _ := net.SplitHostPort(hostPort(public))
	out, _, code = runCLI(t, "cluster", "--admin-url", full.URL, "--edge-admin-port", port)
	notShown := `(?m)^edge-eu-1\s+eu-west\s+not shown: http://127\.0\.0\.1:` + port + ` is its public port; the admin address it announces is ` + regexp.QuoteMeta(hostPort(euAdmin)) + ` \(asked without --edge-admin-port; or give --edge-admin edge-eu-1=URL\)$`
	if !regexp.MustCompile(notShown).MatchString(out) || publicAsked.Load() == 0 {
		t.Errorf("--edge-admin-port over the announced address: %d\n%s", code, out)
	}
}
