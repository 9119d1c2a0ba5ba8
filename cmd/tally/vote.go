package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"tally/api"
	"tally/client"
)

const voteUsage = `tally vote --poll ID --option X [--url URL] [--voter V] [--idem K] [--token T | --session] [--json]

One vote, for a smoke test: POST /v1/polls/{poll}/votes, and the node's
answer printed (status, vote_id, stamp). --session first earns a voter
token (POST /v1/session, solving the node's proof-of-work puzzle), as the
page does; --token sends one earned before (a token is bound to the
address and User-Agent that earned it: see --user-agent). With a token the
node takes the voter from it and --voter is not needed.

A 504 outcome_unknown (an edge that could not tell whether the vote was
ledgered) is followed by the same request, with the same idempotency key,
after its Retry-After, for --unknown-wait at most; the answer printed is
the definitive one. Sending the same --idem again is a retry: the node
answers "duplicate" with the first vote's id and counts it once.

Exit status: 0 when the vote is accepted (or a duplicate of one taken), 1
when it is late, rejected, refused or its outcome stayed unknown, 2 on a
usage error.`

// runVote sends one vote and prints the node's answer. It is long because
// it is one command read top to bottom: its flags, the token, the vote
// and each answer's line and exit status.
func runVote(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally vote", voteUsage)
	var base string
	urlVar(fs, &base, urlUsage)
	pollID := fs.String("poll", "", "the poll to vote in")
	option := fs.String("option", "", "the option's id")
	voter := fs.String("voter", "", "the voter id (default: the token's voter with --token or --session, else a new random one)")
	idem := fs.String("idem", "", "the idempotency key: give the same one to retry a vote (default: a new random one)")
	token := fs.String("token", "", "a voter token (POST /v1/session's \"token\"), sent as Tally-Session")
	earn := fs.Bool("session", false, "earn a voter token first (POST /v1/session, solving the node's puzzle)")
	userAgent := fs.String("user-agent", "", "the User-Agent sent (a voter token is bound to it); default: Go's")
	wait := fs.Duration("unknown-wait", client.DefaultUnknownWait, "how long a vote answered 504 outcome_unknown is sent again")
	asJSON := fs.Bool("json", false, "print the vote's result as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	case *pollID == "" || *option == "":
		return usageError(fs, stderr, "--poll and --option are required")
	case *token != "" && *earn:
		return usageError(fs, stderr, "give --token or --session, not both")
	case *wait <= 0:
		return usageError(fs, stderr, "--unknown-wait %v: must be more than 0", *wait)
	}
	url, from := resolveURL(base)
	c, err := client.New(url, client.Options{UserAgent: *userAgent, UnknownWait: *wait, HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	if err != nil {
		return usageError(fs, stderr, "%s %q: want the node's address, http://host:port or https://host", from, url)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	session := *token
	if *earn {
		start := time.Now()
		s, err := earnSession(ctx, c, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "tally vote: earning a voter token: %v\n", err)
			return 1
		}
		session = s.Token
		*voter = s.Voter // the node takes the token's voter
		fmt.Fprintf(stderr, "voter token earned in %s: voter %s, expires %s\n", time.Since(start).Round(time.Millisecond), s.Voter, fmtMs(s.ExpiresAt))
	}
	shown := *voter // the voter printed: the token's voter replaces the vote's
	switch {
	case *earn:
	case *token != "":
		shown = ""
	case *voter == "":
		shown = client.NewKey()
		*voter = shown
	}
	if *voter == "" {
		*voter = client.NewKey() // a node wants one; the token's replaces it
	}
	if *idem == "" {
		*idem = client.NewKey()
	}
	results, err := c.Vote(ctx, *pollID, session, api.Vote{Option: *option, Voter: *voter, Idem: *idem})
	if err != nil {
		if errors.Is(err, client.ErrOutcomeUnknown) {
			fmt.Fprintf(stderr, "tally vote: %v (send it again with --idem %s to learn its outcome: it counts once)\n", err, *idem)
		} else {
			fmt.Fprintf(stderr, "tally vote: %v\n", err)
		}
		return 1
	}
	r := results[0]
	if *asJSON {
		writeCompactJSON(stdout, r)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "status\t%s\n", r.Status)
		if r.VoteID != "" {
			fmt.Fprintf(tw, "vote_id\t%s\n", r.VoteID)
		}
		if r.Stamp != "" {
			fmt.Fprintf(tw, "stamp\t%s\n", r.Stamp)
		}
		if r.Error != "" {
			fmt.Fprintf(tw, "error\t%s\n", r.Error)
		}
		fmt.Fprintf(tw, "poll\t%s\noption\t%s\n", *pollID, *option)
		if shown != "" {
			fmt.Fprintf(tw, "voter\t%s\n", shown)
		}
		fmt.Fprintf(tw, "idem\t%s\n", r.Idem)
		tw.Flush()
	}
	switch r.Status {
	case api.StatusAccepted, api.StatusDuplicate:
		return 0
	}
	return 1
}

// earnSession earns a voter token, asking again after Retry-After (1 to
// 10 s) while the node paces this address (429), five times at most.
func earnSession(ctx context.Context, c *client.Client, stderr io.Writer) (api.SessionResponse, error) {
	for tries := 0; ; tries++ {
		s, err := c.Session(ctx)
		var e *client.Error
		if err == nil || tries >= 5 || !errors.As(err, &e) || !errors.Is(err, client.ErrRateLimited) {
			return s, err
		}
		wait := min(max(e.RetryAfter, time.Second), 10*time.Second)
		fmt.Fprintf(stderr, "the node paces voter tokens for this address: asking again in %s\n", wait)
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(wait):
		}
	}
}
