package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"tally/api"
	"tally/client"
)

// tally cluster asks every edge of the member list for its own
// GET /v1/cluster: only an edge knows which full node it relays to now
// (relays_to) and which one its NATS leaf connection is on (leaf_hub);
// a full node knows neither. An edge with --admin-addr answers them on
// that address only, which it announces in the membership (admin_addr):
// it is asked there, unless the operator says otherwise
// (--edge-admin NAME=URL, --edge-admin-port). An edge of a release that
// announces none is asked at its HTTP address, and its row says why that
// was not enough.

const (
	// edgeTimeout bounds the question to one edge.
	edgeTimeout = 2 * time.Second
	// edgeParallel is how many edges are asked at once.
	edgeParallel = 8
)

// Relay states of an edge (edgeReport.Relay).
const (
	relayOwnRegion  = "own_region"  // its first target is of its region
	relayFailedOver = "failed_over" // its first target is of another region
	relayNone       = "none"        // it has no full node to relay to
	relayUnknown    = "unknown"     // its first target's region is not known
)

// clusterReport is what tally cluster --json prints: the node's answer,
// and under "edges" each edge's own view of where it relays.
type clusterReport struct {
	api.ClusterView
	Edges []edgeReport `json:"edges,omitempty"`
}

// edgeReport is one edge as it says it relays, or why it could not say.
type edgeReport struct {
	Name   string `json:"name"`
	Region string `json:"region"`
	// URL is where the edge was asked ("" when nowhere could be).
	URL string `json:"url,omitempty"`
	// RelaysTo: the full nodes it relays votes to now, as it answered.
	RelaysTo []api.ClusterTarget `json:"relays_to,omitempty"`
	// Relay: own_region, failed_over (its first target is of another
	// region), none or unknown; empty when the edge did not say.
	Relay string `json:"relay,omitempty"`
	// LeafHub: the full node its NATS leaf connection is on.
	LeafHub *api.ClusterTarget `json:"leaf_hub,omitempty"`
	// Error: why the edge's view is missing.
	Error string `json:"error,omitempty"`
}

// edgeAddrs is where to ask the edges: --edge-admin NAME=URL by name,
// else the host of the announced HTTP address with --edge-admin-port,
// else the announced admin address, else the announced HTTP address
// itself (an edge without --admin-addr answers whole there).
type edgeAddrs struct {
	byName map[string]string
	port   int
}

// String and Set make --edge-admin NAME=URL a repeatable flag.
func (a *edgeAddrs) String() string { return fmt.Sprint(len(a.byName), " edges") }

// Set adds one NAME=URL.
func (a *edgeAddrs) Set(s string) error {
	name, u, ok := strings.Cut(s, "=")
	if name, u = strings.TrimSpace(name), strings.TrimSpace(u); !ok || name == "" || u == "" {
		return fmt.Errorf("want NAME=URL (the edge's node name and its --admin-addr, http://host:port), not %q", s)
	}
	if a.byName == nil {
		a.byName = map[string]string{}
	}
	a.byName[name] = u
	return nil
}

// url is where to ask member m for its view, and whether that is the
// admin address m announces.
func (a edgeAddrs) url(m api.ClusterMember) (u string, announced bool, err error) {
	if u, ok := a.byName[m.Name]; ok {
		return u, false, nil
	}
	scheme := "http://"
	if m.HTTPS { // its admin listener too
		scheme = "https://"
	}
	if a.port == 0 && m.AdminAddr != "" {
		return scheme + m.AdminAddr, true, nil
	}
	if m.HTTPAddr == "" {
		return "", false, fmt.Errorf("it announces no HTTP address; give --edge-admin %s=URL", m.Name)
	}
	if a.port == 0 {
		return scheme + m.HTTPAddr, false, nil
	}
	host, _, err := net.SplitHostPort(m.HTTPAddr)
	if err != nil {
		return "", false, fmt.Errorf("cannot take the host of its HTTP address %q: %w", m.HTTPAddr, err)
	}
	return scheme + net.JoinHostPort(host, strconv.Itoa(a.port)), false, nil
}

// askEdges asks every edge among v's members for its view, at most
// edgeParallel at once and each within timeout, in the members' order.
// An edge that is the node v came from is not asked again.
func askEdges(ctx context.Context, v api.ClusterView, where edgeAddrs, timeout time.Duration) []edgeReport {
	var edges []api.ClusterMember
	for _, m := range v.Members {
		if m.Role == "edge" {
			edges = append(edges, m)
		}
	}
	out := make([]edgeReport, len(edges)) // sized first: the goroutines hold pointers into it
	var wg sync.WaitGroup
	sem := make(chan struct{}, edgeParallel)
	for i, m := range edges {
		r := &out[i]
		*r = edgeReport{Name: m.Name, Region: m.Region}
		if m.Self && m.Name == v.Self {
			r.fill(v)
			continue
		}
		u, announced, err := where.url(m)
		if err != nil {
			r.Error = "not asked: " + err.Error()
			continue
		}
		r.URL = u
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ask, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			ev, err := edgeView(ask, u, timeout)
			switch {
			case err != nil && announced:
				r.Error = fmt.Sprintf("%v (at the admin address it announces; if it is reached from here at another, give --edge-admin %s=URL)", err, r.Name)
			case err != nil:
				r.Error = err.Error()
			default:
				r.check(ev, m.AdminAddr)
			}
		})
	}
	wg.Wait()
	return out
}

// edgeView is GET /v1/cluster at u, without the admin token: the
// endpoint needs none, and the address is the membership's, not the
// operator's.
func edgeView(ctx context.Context, u string, timeout time.Duration) (api.ClusterView, error) {
	c, err := client.New(u, client.Options{HTTPClient: &http.Client{Timeout: timeout}})
	if err != nil {
		return api.ClusterView{}, fmt.Errorf("not asked: %w", err)
	}
	v, err := c.Cluster(ctx)
	if err != nil {
		return api.ClusterView{}, fmt.Errorf("unreachable: %w", err)
	}
	return v, nil
}

// check fills r from the view its edge answered, or says why the view
// is not the edge's whole one; admin is the admin address the edge
// announces ("": none; else the operator's flags sent the question
// elsewhere).
func (r *edgeReport) check(v api.ClusterView, admin string) {
	switch {
	case v.Self == "" && admin != "":
		r.Error = fmt.Sprintf("not shown: %s is its public port; the admin address it announces is %s (asked without --edge-admin-port; or give --edge-admin %s=URL)", r.URL, admin, r.Name)
	case v.Self == "":
		r.Error = fmt.Sprintf("not shown: %s is its public port (the edge has --admin-addr and announces none: a release before v0.5.0); give --edge-admin-port PORT or --edge-admin %s=URL", r.URL, r.Name)
	case v.Self != r.Name:
		r.Error = fmt.Sprintf("not shown: %s answered as %q, not %s", r.URL, v.Self, r.Name)
	default:
		r.fill(v)
	}
}

// fill takes the edge's relay targets and leaf hub from its own view.
func (r *edgeReport) fill(v api.ClusterView) {
	if v.Region != "" {
		r.Region = v.Region
	}
	r.RelaysTo = v.RelaysTo
	if v.NATS != nil {
		r.LeafHub = v.NATS.LeafHub
	}
	switch {
	case len(r.RelaysTo) == 0:
		r.Relay = relayNone
	case r.RelaysTo[0].Region == "" || r.RelaysTo[0].Region == "unheard":
		r.Relay = relayUnknown
	case r.RelaysTo[0].Region == r.Region:
		r.Relay = relayOwnRegion
	default:
		r.Relay = relayFailedOver
	}
}

// printEdges prints the edges section of tally cluster.
func printEdges(w io.Writer, edges []edgeReport) {
	if len(edges) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nEDGE\tREGION\tRELAYS TO\tRELAY\tLEAF HUB")
	for _, e := range edges {
		if e.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.Region, e.Error)
			continue
		}
		to := "-"
		if len(e.RelaysTo) > 0 {
			to = fmtTarget(e.RelaysTo[0], true)
			if n := len(e.RelaysTo) - 1; n > 0 {
				to += fmt.Sprintf(" +%d more", n)
			}
		}
		hub := "none"
		if e.LeafHub != nil {
			hub = fmtTarget(*e.LeafHub, false)
			if e.LeafHub.Region != "" && e.LeafHub.Region != e.Region {
				hub = strings.TrimSuffix(hub, ")") + ", not its region)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, e.Region, to, relayWords(e), hub)
	}
	tw.Flush()
}

// fmtTarget names a full node: "node (replica, region)".
func fmtTarget(t api.ClusterTarget, replica bool) string {
	name, region := t.Node, t.Region
	if name == "" {
		name = "?"
	}
	if region == "" {
		region = "region unknown"
	}
	if replica && t.Replica != "" {
		return fmt.Sprintf("%s (%s, %s)", name, t.Replica, region)
	}
	return fmt.Sprintf("%s (%s)", name, region)
}

// relayWords says an edge's relay state for the table.
func relayWords(e edgeReport) string {
	switch e.Relay {
	case relayOwnRegion:
		return "its own region"
	case relayFailedOver:
		return "failed over to " + e.RelaysTo[0].Region
	case relayNone:
		return "no full node to relay to"
	default:
		return "region unknown"
	}
}
