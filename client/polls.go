package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"tally/api"
	"tally/poll"
)

// CreatePoll creates a poll (admin); spec's zero fields take the node's
// defaults (an id, opening now, 60 s).
func (c *Client) CreatePoll(ctx context.Context, spec poll.Spec) (api.PollView, error) {
	var v api.PollView
	err := c.call(ctx, http.MethodPost, path("polls"), nil, spec, &v)
	return v, err
}

// Poll returns a poll as the node shows it now. A hidden poll has no
// counts but for the admin token.
func (c *Client) Poll(ctx context.Context, id string) (api.PollView, error) {
	var v api.PollView
	err := c.call(ctx, http.MethodGet, path("polls", id), nil, nil, &v)
	return v, err
}

// ListOptions select a page of GET /v1/polls.
type ListOptions struct {
	Event  string // only this show's polls
	Limit  int    // polls a page, 1 to api.MaxPageSize; 0: the node's default
	Cursor string // the previous page's NextCursor
}

// ListPolls returns one page of polls, newest first.
func (c *Client) ListPolls(ctx context.Context, o ListOptions) (api.PollPage, error) {
	q := url.Values{}
	if o.Event != "" {
		q.Set("event", o.Event)
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	var p api.PollPage
	err := c.call(ctx, http.MethodGet, path("polls"), q, nil, &p)
	return p, err
}

// AllPolls returns every poll (of o.Event, when set), following the
// cursors from the first page.
func (c *Client) AllPolls(ctx context.Context, o ListOptions) ([]api.PollView, error) {
	o.Cursor = ""
	if o.Limit == 0 {
		o.Limit = api.MaxPageSize
	}
	all := []api.PollView{}
	for {
		p, err := c.ListPolls(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Polls...)
		if p.NextCursor == "" {
			return all, nil
		}
		o.Cursor = p.NextCursor
	}
}

// ClosePoll closes a poll now (admin); closing a closed poll changes
// nothing.
func (c *Client) ClosePoll(ctx context.Context, id string) (api.PollView, error) {
	var v api.PollView
	err := c.call(ctx, http.MethodPost, path("polls", id, "close"), nil, struct{}{}, &v)
	return v, err
}

// ExtendPoll moves an open poll's close later (admin).
func (c *Client) ExtendPoll(ctx context.Context, id string, req api.ExtendRequest) (api.PollView, error) {
	var v api.PollView
	err := c.call(ctx, http.MethodPost, path("polls", id, "extend"), nil, req, &v)
	return v, err
}

// RevealPoll shows a hidden poll's counts to everyone (admin).
func (c *Client) RevealPoll(ctx context.Context, id string) (api.PollView, error) {
	var v api.PollView
	err := c.call(ctx, http.MethodPost, path("polls", id, "reveal"), nil, struct{}{}, &v)
	return v, err
}

// Result returns the poll's certification as the node knows it: Status
// "reconciled" with the certificate, or "pending" with the reason.
func (c *Client) Result(ctx context.Context, id string) (api.ResultView, error) {
	var v api.ResultView
	err := c.call(ctx, http.MethodGet, path("polls", id, "result"), nil, nil, &v)
	return v, err
}

// Certify asks the node to certify the poll now (admin), optionally
// without replicas (docs/certification.md).
func (c *Client) Certify(ctx context.Context, id string, req api.CertifyRequest) (api.ResultView, error) {
	var v api.ResultView
	err := c.call(ctx, http.MethodPost, path("polls", id, "certify"), nil, req, &v)
	return v, err
}

// Export streams this node's records of the poll as NDJSON, its chain
// heads signed (admin); the caller closes it. `tally ledger verify` and
// `merge` read it.
func (c *Client) Export(ctx context.Context, id string) (io.ReadCloser, error) {
	res, err := c.request(ctx, http.MethodGet, path("polls", id, "ledger"), nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// Backup streams a consistent backup of the node's data (admin): a tar
// archive that `tally ledger restore` reads. The caller closes it.
func (c *Client) Backup(ctx context.Context) (io.ReadCloser, error) {
	res, err := c.request(ctx, http.MethodGet, path("backup"), nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// Cluster returns GET /v1/cluster: members, replicas and their
// staleness, and NATS links (admin address); on a public port of a node
// with --admin-addr, only the region and the freshness vector.
func (c *Client) Cluster(ctx context.Context) (api.ClusterView, error) {
	var v api.ClusterView
	err := c.call(ctx, http.MethodGet, path("cluster"), nil, nil, &v)
	return v, err
}
