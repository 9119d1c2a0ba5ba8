package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"tally/api"
	"tally/client"
	"tally/poll"
)

// The admin commands drive a running node's API as a host does with curl:
// create, list, show, close, extend and reveal polls, and show the
// cluster. They print a table, or the node's JSON answer with --json.

const pollHelp = `usage: tally poll <subcommand> [flags]

subcommands:
  create   --question Q --option ID[=LABEL]… [--duration D | --closes-at T] …
           create a poll (admin)
  list     [--event E]                 every poll the node holds, newest first
  show     --poll ID                   one poll with its live tally
  close    --poll ID                   close a poll now (admin)
  extend   --poll ID (--by D | --closes-at T)
                                       move an open poll's close (admin)
  reveal   --poll ID                   show a hidden poll's counts (admin)
  result   --poll ID [FILE…]           the certified result; with exports,
                                       check that they reproduce its digest
  certify  --poll ID [--exclude REPLICA | --accept-lost REPLICA]
           [--reason TEXT]             certify now (admin)

Every subcommand takes --url URL (else $TALLY_URL; --node is its old
spelling) and the admin token from --token-file FILE, $TALLY_TOKEN or
--token; "tally poll SUB --help" lists its flags.
`

func runPoll(args []string, stdout, stderr io.Writer) int {
	return group("poll", pollHelp, map[string]func([]string, io.Writer, io.Writer) int{
		"create":  pollCreate,
		"list":    pollList,
		"show":    pollShow,
		"close":   func(a []string, o, e io.Writer) int { return pollAmend("close", a, o, e) },
		"extend":  func(a []string, o, e io.Writer) int { return pollAmend("extend", a, o, e) },
		"reveal":  func(a []string, o, e io.Writer) int { return pollAmend("reveal", a, o, e) },
		"result":  pollResult,
		"certify": pollCertify,
	}, args, stdout, stderr)
}

// optionFlag collects --option ID[=LABEL].
type optionFlag []poll.Option

func (o *optionFlag) String() string { return fmt.Sprint(len(*o), " options") }
func (o *optionFlag) Set(s string) error {
	id, label, ok := strings.Cut(s, "=")
	if !ok {
		label = id
	}
	*o = append(*o, poll.Option{ID: strings.TrimSpace(id), Label: strings.TrimSpace(label)})
	return nil
}

// timeFlag is an RFC 3339 time or Unix milliseconds.
type timeFlag struct{ ms *int64 }

func (t timeFlag) String() string {
	if t.ms == nil || *t.ms == 0 {
		return ""
	}
	return time.UnixMilli(*t.ms).UTC().Format(time.RFC3339)
}
func (t timeFlag) Set(s string) error {
	if tm, err := time.Parse(time.RFC3339, s); err == nil {
		*t.ms = tm.UnixMilli()
		return nil
	}
	var ms int64
	if _, err := fmt.Sscan(s, &ms); err != nil || fmt.Sprint(ms) != s {
		return fmt.Errorf("%q is neither an RFC 3339 time (2026-12-01T20:00:00Z) nor Unix milliseconds", s)
	}
	*t.ms = ms
	return nil
}

func pollCreate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally poll create", "tally poll create --question Q --option ID[=LABEL] --option … [flags]")
	var nf nodeFlags
	nf.register(fs)
	var spec poll.Spec
	var options optionFlag
	var opensAt, closesAt int64
	fs.StringVar(&spec.ID, "id", "", "poll id (default: generated)")
	fs.StringVar(&spec.Question, "question", "", "the question")
	fs.Var(&options, "option", "an option, ID or ID=LABEL (repeat, 2 or more)")
	duration := fs.Duration("duration", 0, "how long the poll runs (default 60s)")
	fs.Var(timeFlag{&closesAt}, "closes-at", "when the poll closes (RFC 3339 or Unix ms), instead of --duration")
	fs.Var(timeFlag{&opensAt}, "opens-at", "when the poll opens (RFC 3339 or Unix ms; default now)")
	grace := fs.Duration("grace", 0, "how long after close late votes are still ledgered (default 2s)")
	fs.BoolVar(&spec.Hidden, "hidden", false, "show no counts until revealed")
	fs.StringVar(&spec.Event, "event", "", "the show the poll belongs to")
	fs.BoolVar(&spec.Public, "public", false, "votes need a voter token earned with the proof of work")
	asJSON := fs.Bool("json", false, "print the node's answer as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	case spec.Question == "" || len(options) < 2:
		return usageError(fs, stderr, "--question and at least two --option are required")
	case *duration != 0 && closesAt != 0:
		return usageError(fs, stderr, "give --duration or --closes-at, not both")
	}
	spec.Options = options
	if *duration != 0 {
		s := duration.Seconds()
		spec.DurationS = &s
	}
	if closesAt != 0 {
		spec.ClosesAt = &closesAt
	}
	if opensAt != 0 {
		spec.OpensAt = &opensAt
	}
	if *grace != 0 {
		s := grace.Seconds()
		spec.GraceS = &s
	}
	return show(nf, *asJSON, stdout, stderr, printPoll, func(ctx context.Context, c *client.Client) (api.PollView, error) {
		return c.CreatePoll(ctx, spec)
	})
}

func pollShow(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally poll show", "tally poll show --poll ID [--json]")
	var nf nodeFlags
	nf.register(fs)
	id := fs.String("poll", "", "poll id")
	asJSON := fs.Bool("json", false, "print the node's answer as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *id == "" || fs.NArg() > 0 {
		return usageError(fs, stderr, "--poll is required, and nothing else")
	}
	return show(nf, *asJSON, stdout, stderr, printPoll, func(ctx context.Context, c *client.Client) (api.PollView, error) {
		return c.Poll(ctx, *id)
	})
}

// pollAmend closes, extends or reveals a poll.
func pollAmend(verb string, args []string, stdout, stderr io.Writer) int {
	synopsis := "tally poll " + verb + " --poll ID"
	if verb == "extend" {
		synopsis += " (--by DURATION | --closes-at TIME)"
	}
	fs := newFlags("tally poll "+verb, synopsis+" [--json]")
	var nf nodeFlags
	nf.register(fs)
	id := fs.String("poll", "", "poll id")
	asJSON := fs.Bool("json", false, "print the node's answer as JSON")
	var by *time.Duration
	var closesAt int64
	if verb == "extend" {
		by = fs.Duration("by", 0, "move the close this much later")
		fs.Var(timeFlag{&closesAt}, "closes-at", "the new close (RFC 3339 or Unix ms)")
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *id == "" || fs.NArg() > 0 {
		return usageError(fs, stderr, "--poll is required, and nothing else")
	}
	var req api.ExtendRequest
	if verb == "extend" {
		switch {
		case (*by != 0) == (closesAt != 0):
			return usageError(fs, stderr, "give one of --by and --closes-at")
		case *by != 0:
			s := by.Seconds()
			req.ByS = &s
		default:
			req.ClosesAt = &closesAt
		}
	}
	return show(nf, *asJSON, stdout, stderr, printPoll, func(ctx context.Context, c *client.Client) (api.PollView, error) {
		switch verb {
		case "close":
			return c.ClosePoll(ctx, *id)
		case "extend":
			return c.ExtendPoll(ctx, *id, req)
		default:
			return c.RevealPoll(ctx, *id)
		}
	})
}

// show runs one call of the client and prints its answer with print, or
// as JSON with --json.
func show[T any](nf nodeFlags, asJSON bool, stdout, stderr io.Writer, print func(io.Writer, T), fn func(context.Context, *client.Client) (T, error)) int {
	v, code := call(nf, stderr, fn)
	if code != 0 {
		return code
	}
	if asJSON {
		writeCompactJSON(stdout, v)
	} else {
		print(stdout, v)
	}
	return 0
}

// writeCompactJSON prints v on one line, as the node answers.
func writeCompactJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, "tally: %v\n", err)
		return
	}
	w.Write(append(b, '\n'))
}

// call makes the node's client and runs one call with it. Errors are
// printed as one line: 2 for the flags, 1 for the node's answer.
func call[T any](nf nodeFlags, stderr io.Writer, fn func(context.Context, *client.Client) (T, error)) (T, int) {
	var zero T
	c, err := nf.client()
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return zero, 2
	}
	v, err := fn(context.Background(), c)
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", nf.explain(err))
		return zero, 1
	}
	return v, 0
}

func printPoll(w io.Writer, v api.PollView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "poll\t%s\nquestion\t%s\nstatus\t%s\n", v.ID, v.Question, v.Status)
	fmt.Fprintf(tw, "opens\t%s\ncloses\t%s\n", fmtMs(v.OpensAt), fmtMs(v.ClosesAt))
	if v.Event != "" {
		fmt.Fprintf(tw, "event\t%s\n", v.Event)
	}
	if v.Hidden {
		fmt.Fprintf(tw, "hidden\tyes (counts shown only to the admin until revealed)\n")
	}
	if v.Total != nil {
		fmt.Fprintf(tw, "total\t%d\n", *v.Total)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, o := range v.Options {
		if v.Totals != nil {
			fmt.Fprintf(tw, "  %s\t%d\t  %s\n", o.ID, v.Totals[o.ID], o.Label)
		} else {
			fmt.Fprintf(tw, "  %s\t-\t  %s\n", o.ID, o.Label)
		}
	}
	tw.Flush()
}

func fmtMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000Z")
}

func pollList(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally poll list", "tally poll list [--event E] [--json]")
	var nf nodeFlags
	nf.register(fs)
	event := fs.String("event", "", "only this show's polls")
	asJSON := fs.Bool("json", false, "print the polls as one JSON array")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	all, code := call(nf, stderr, func(ctx context.Context, c *client.Client) ([]api.PollView, error) {
		return c.AllPolls(ctx, client.ListOptions{Event: *event})
	})
	if code != 0 {
		return code
	}
	if *asJSON {
		if all == nil {
			all = []api.PollView{}
		}
		writeJSON(stdout, all)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLL\tSTATUS\tCLOSES\tTOTAL\tEVENT\tQUESTION")
	for _, v := range all {
		total := "hidden"
		if v.Total != nil {
			total = fmt.Sprint(*v.Total)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Status, fmtMs(v.ClosesAt), total, v.Event, v.Question)
	}
	tw.Flush()
	return 0
}

const clusterUsage = `tally cluster [--url URL] [--admin-url URL] [--edge-admin-port PORT | --edge-admin NAME=URL…] [--json]

The cluster as one node sees it (GET /v1/cluster): this node (name,
region, replica id, role), its NATS links (connected, embedded, routes,
gateways, leaf nodes), each region's staleness, every member (region,
replica id, role, state, gossip, HTTP and admin addresses) and every
replica heard from with its staleness; then, for every edge, the full
node it relays votes to now (its own region's, or failed over to
another's) and the one its NATS leaf connection is on, as the edge
itself answers GET /v1/cluster (each asked within 2s, 8 at a time;
"unreachable: …" when it does not answer).

Each edge is asked at the admin address it announces in the membership
(an edge with --admin-addr answers that there only), else, without one,
at its HTTP address. Where the announced address is not the one to use
from here (a NAT, a proxy), --edge-admin NAME=URL gives one edge's, and
--edge-admin-port PORT every edge's admin port on the host of its HTTP
address; NAME=URL wins over the port, the port over the announced
address. An edge of a release before v0.5.0 announces none: its row
says it was asked at its public port, which does not say where it
relays; give it one of the two.

A node started with --admin-addr (as in production and scripts/cluster.sh)
answers members, replica ids and NATS links on that address only; its
public port answers each region's staleness alone. Give the admin address
as --admin-url (or $TALLY_ADMIN_URL; scripts/cluster.sh's first node:
http://localhost:9101). Without it the command asks --url ($TALLY_URL), and
says so when that is a public port.`

// runCluster prints GET /v1/cluster: the whole view from a node's admin
// address (or a node without --admin-addr) with each edge's own answer of
// where it relays (askEdges), the regions' staleness and what to give for
// the rest from a public port.
func runCluster(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally cluster", clusterUsage)
	var nf nodeFlags
	nf.register(fs)
	adminURL := fs.String("admin-url", "", "the node's --admin-addr, http://host:port: the whole view (default: $TALLY_ADMIN_URL, else --url)")
	var edges edgeAddrs
	fs.Var(&edges, "edge-admin", "an edge's --admin-addr, NAME=URL (repeat): where to ask it for its relay targets (default: the admin address it announces)")
	fs.IntVar(&edges.port, "edge-admin-port", 0, "the edges' --admin-addr port, on the host of their HTTP address (default: the admin address each announces, else its HTTP address)")
	asJSON := fs.Bool("json", false, "print the node's answer, and each edge's under \"edges\", as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	if edges.port < 0 || edges.port > 65535 {
		return usageError(fs, stderr, "--edge-admin-port %d: want a port, 1-65535", edges.port)
	}
	url, from := resolveURL(nf.url)
	switch env := os.Getenv("TALLY_ADMIN_URL"); {
	case *adminURL != "":
		url, from = *adminURL, "--admin-url"
	case env != "":
		url, from = env, "$TALLY_ADMIN_URL"
	}
	c, err := nf.clientAt(url, from)
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 2
	}
	v, err := c.Cluster(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", nf.explain(err))
		return 1
	}
	var edgeViews []edgeReport
	if v.Self != "" {
		edgeViews = askEdges(context.Background(), v, edges, edgeTimeout)
	}
	if *asJSON {
		writeCompactJSON(stdout, clusterReport{ClusterView: v, Edges: edgeViews})
	} else {
		printCluster(stdout, v)
		printEdges(stdout, edgeViews)
	}
	if v.Self == "" {
		fmt.Fprintf(stderr, "tally cluster: %s (%s) is a public port: it shows each region's staleness only; members, replica ids and NATS links are on the node's --admin-addr: give it as --admin-url http://HOST:PORT or $TALLY_ADMIN_URL\n", url, from)
	}
	return 0
}

// printCluster prints a cluster view as tables.
func printCluster(w io.Writer, v api.ClusterView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if v.Self != "" {
		fmt.Fprintf(tw, "node\t%s\nregion\t%s\nreplica\t%s\nrole\t%s\n", v.Self, v.Region, v.Replica, v.Role)
	} else {
		fmt.Fprintf(tw, "region\t%s\n", v.Region)
	}
	if n := v.NATS; n != nil {
		gateways := strings.Join(slices.Sorted(slices.Values(n.Gateways)), ", ")
		if gateways == "" {
			gateways = "none"
		}
		fmt.Fprintf(tw, "nats\tconnected %t, embedded %t, routes %d, gateways %s, leaf nodes %d\n", n.Connected, n.Embedded, n.Routes, gateways, n.LeafNodes)
	}
	fmt.Fprintln(tw, "\nREGION\tSTALENESS")
	for _, r := range slices.Sorted(maps.Keys(v.Regions)) {
		fmt.Fprintf(tw, "%s\t%s\n", r, time.Duration(v.Regions[r])*time.Millisecond)
	}
	if v.Self != "" {
		fmt.Fprintln(tw, "\nMEMBER\tREGION\tREPLICA\tROLE\tSTATE\tRELEASE\tGOSSIP\tHTTP\tADMIN")
		for _, m := range v.Members {
			name := m.Name
			if m.Self {
				name += " (this node)"
			}
			http := m.HTTPAddr
			if http != "" && m.HTTPS {
				http += " (https)"
			}
			rel := cmp.Or(m.Release, "-")
			if m.Protocol > 0 { // 0: the node asked is of a release before v0.5.0, which does not say
				rel += fmt.Sprintf(" (protocol %d)", m.Protocol)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, m.Region, m.Replica, m.Role, m.State, rel, m.Gossip, cmp.Or(http, "-"), cmp.Or(m.AdminAddr, "-"))
		}
		fmt.Fprintln(tw, "\nREPLICA\tREGION\tSTALENESS")
		for _, r := range v.Replicas {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Replica, r.Region, time.Duration(r.StalenessMs)*time.Millisecond)
		}
	}
	tw.Flush()
}
