package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"tally/api"
)

// ErrConfig reports a client that cannot be built (a malformed URL).
var ErrConfig = errors.New("client: config")

// Sentinels an *Error matches with errors.Is, by its status.
var (
	ErrNotFound     = errors.New("client: not found")    // 404
	ErrUnauthorized = errors.New("client: unauthorized") // 401
	ErrConflict     = errors.New("client: conflict")     // 409
	ErrRateLimited  = errors.New("client: rate limited") // 429
	ErrUnavailable  = errors.New("client: unavailable")  // 503: retry after RetryAfter
	// ErrOutcomeUnknown is a 504 (outcome_unknown): an edge that cannot
	// tell whether the vote was ledgered. Vote sends the same request
	// again until a definitive answer, for Options.UnknownWait at most.
	ErrOutcomeUnknown = errors.New("client: outcome unknown")
)

// Error is an error answer of the node: its HTTP status, the API's error
// code and message, and how long to wait before a retry when it said.
type Error struct {
	Method, URL string
	Status      int
	Code        string // docs/api.md, "Errors"; "" when the body was not the API's error shape
	Message     string
	RetryAfter  time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, e.Message)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.Status, e.Code, e.Message)
}

// Is matches the sentinel of e's status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	case ErrOutcomeUnknown:
		return e.Status == http.StatusGatewayTimeout || e.Code == api.CodeOutcomeUnknown
	}
	return false
}

// Options configure a Client.
type Options struct {
	// Token is the admin token, sent as "Authorization: Bearer" on every
	// request; "" for a viewer or voter.
	Token string
	// HTTPClient sends the requests; nil: one with a 30 s timeout. (A
	// ledger export or backup streams for as long as it takes: give a
	// client without a timeout and bound it by the context.)
	HTTPClient *http.Client
	// UserAgent is sent on every request; a voter token is bound to it.
	UserAgent string
	// UnknownWait bounds how long Vote sends a request answered 504
	// outcome_unknown again (after each Retry-After) before it returns
	// ErrOutcomeUnknown; 0: DefaultUnknownWait; below 0: not sent again.
	UnknownWait time.Duration
}

// DefaultUnknownWait is how long Vote resolves an unknown outcome.
const DefaultUnknownWait = 30 * time.Second

// Client calls one node's API.
type Client struct {
	base   *url.URL
	opts   Options
	stamps stamps // the newest stamp of each voter's answers, per poll
}

// DefaultTimeout bounds a request when Options.HTTPClient is nil.
const DefaultTimeout = 30 * time.Second

// New returns a client of the node at baseURL (http:// or https://, with
// no path, or a path prefix the node is served under).
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: node URL %q: want http://host:port or https://host", ErrConfig, baseURL)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: DefaultTimeout}
	}
	if opts.UnknownWait == 0 {
		opts.UnknownWait = DefaultUnknownWait
	}
	return &Client{base: u, opts: opts}, nil
}

// URL returns the node's base URL.
func (c *Client) URL() string { return c.base.String() }

// path joins escaped segments under the base: path("polls", id, "votes").
func path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// request sends one request. body, when not nil, is sent as JSON; a 2xx
// answer is returned open, anything else becomes an *Error.
func (c *Client) request(ctx context.Context, method, p string, query url.Values, body any, header http.Header) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: encode %s %s: %w", method, p, err)
		}
		r = bytes.NewReader(b)
	}
	u := *c.base
	u.Path += p
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // every write is declared JSON, a body or none
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if c.opts.UserAgent != "" {
		req.Header.Set("User-Agent", c.opts.UserAgent)
	}
	res, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, u.Redacted(), err)
	}
	if res.StatusCode/100 != 2 {
		defer res.Body.Close()
		return nil, ResponseError(method, u.Redacted(), res)
	}
	return res, nil
}

// maxAnswer bounds a JSON answer read into memory (a list page of 200
// polls of 32 options is far below it).
const maxAnswer = 64 << 20

// call sends one request and decodes its JSON answer into out (nil: the
// answer is discarded).
func (c *Client) call(ctx context.Context, method, p string, query url.Values, body, out any) error {
	res, err := c.request(ctx, method, p, query, body, nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if err := decodeJSON(res, out); err != nil {
		return fmt.Errorf("client: %s %s: %w", method, p, err)
	}
	return nil
}

// decodeJSON reads a JSON answer of at most maxAnswer bytes into out
// (nil: read and discarded).
func decodeJSON(res *http.Response, out any) error {
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
	if err != nil {
		return err
	}
	if len(b) > maxAnswer {
		return fmt.Errorf("answer over %d bytes", maxAnswer)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode the answer: %w", err)
	}
	return nil
}

// ResponseError turns a non-2xx answer into an *Error: its status, the
// API's error code and message (or the body's text), and Retry-After.
// It reads at most 16 KiB of the body; the caller closes it.
func ResponseError(method, u string, res *http.Response) *Error {
	e := &Error{Method: method, URL: u, Status: res.StatusCode}
	if s := res.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 16<<10))
	var body api.ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}
