package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"tally/api"
)

// Tally is a poll's live tally as Watch follows it.
type Tally struct {
	Poll   string
	Seq    uint64 // the seq of the last frame applied (the serving node's)
	Status string // scheduled, open, closed, reconciled
	// Totals holds every option's count; it is empty while Hidden.
	Totals map[string]int64
	Total  int64
	Hidden bool
	// Final: the poll is certified and Totals are the certificate's;
	// Digest names the result. Watch returns after delivering it.
	Final  bool
	Digest string
	// Frame is the last frame applied, as the node sent it (a snapshot
	// carries the question and options; every frame the viewers, the
	// votes per minute and the regions' freshness).
	Frame api.Frame
}

// WatchOptions configure Watch.
type WatchOptions struct {
	// OnTally is called, on Watch's goroutine, after every snapshot, diff
	// and final frame applied; the Tally is the caller's to keep. An
	// error it returns stops Watch, which returns it.
	OnTally func(Tally) error
	// MinBackoff and MaxBackoff bound the wait before a reconnection: a
	// random time up to MinBackoff·2^attempt, at most MaxBackoff ("full
	// jitter", so a million viewers of a restarted node do not come back
	// at once). Defaults: 250 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
}

// Default back-off of Watch's reconnections.
const (
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
)

// maxFrame bounds a frame read off the stream.
const maxFrame = 1 << 20

// Watch follows a poll's live stream over WebSocket until ctx ends (it
// returns ctx's error) or the poll is certified (it returns nil after
// delivering the final tally). It applies a diff only on top of the frame
// before it and asks for a snapshot (resync) on a gap, so every Tally it
// delivers is exact as of its frame; it reconnects after a dropped
// connection with jittered back-off. A poll that does not exist, or a
// refused handshake, ends it with an *Error.
func (c *Client) Watch(ctx context.Context, pollID string, o WatchOptions) error {
	if o.OnTally == nil {
		return fmt.Errorf("%w: WatchOptions.OnTally is required", ErrConfig)
	}
	o.MinBackoff = cmpDuration(o.MinBackoff, DefaultMinBackoff)
	o.MaxBackoff = cmpDuration(o.MaxBackoff, DefaultMaxBackoff)
	for attempt := 0; ; attempt++ {
		delivered, err := c.watchOnce(ctx, pollID, o.OnTally)
		switch {
		case errors.Is(err, errFinal):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case isPermanent(err):
			return err
		}
		if delivered {
			attempt = 0 // the connection worked: start the back-off over
		}
		wait := min(o.MaxBackoff, o.MinBackoff<<min(attempt, 16))
		t := time.NewTimer(rand.N(wait) + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// errFinal ends a connection after the final frame.
var errFinal = errors.New("client: final")

// errCallback wraps an error of OnTally: Watch returns it.
type errCallback struct{ err error }

func (e errCallback) Error() string { return e.err.Error() }
func (e errCallback) Unwrap() error { return e.err }

// isPermanent reports whether err ends Watch rather than a reconnection:
// the caller's own error, or a handshake the node refused for a reason a
// retry does not change.
func isPermanent(err error) bool {
	if errors.As(err, new(errCallback)) {
		return true
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status != http.StatusServiceUnavailable && e.Status != http.StatusTooManyRequests && e.Status/100 != 5
	}
	return false
}

// watchOnce runs one connection; delivered says whether it delivered a
// tally (the connection worked).
func (c *Client) watchOnce(ctx context.Context, pollID string, onTally func(Tally) error) (delivered bool, err error) {
	u := *c.base
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	u.Path += path("polls", pollID, "live")
	header := http.Header{}
	if c.opts.Token != "" {
		header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if c.opts.UserAgent != "" {
		header.Set("User-Agent", c.opts.UserAgent)
	}
	conn, res, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.opts.HTTPClient, HTTPHeader: header})
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			return false, ResponseError(http.MethodGet, u.Redacted(), res)
		}
		return false, fmt.Errorf("client: watch %s: %w", u.Redacted(), err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxFrame)
	var f follower
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return delivered, fmt.Errorf("client: watch %s: %w", u.Redacted(), err)
		}
		t, ok, resync := f.apply(b)
		if resync {
			if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"resync"}`)); err != nil {
				return delivered, fmt.Errorf("client: watch %s: %w", u.Redacted(), err)
			}
		}
		if !ok {
			continue
		}
		delivered = true
		if err := onTally(t); err != nil {
			return delivered, errCallback{err}
		}
		if t.Final {
			conn.Close(websocket.StatusNormalClosure, "")
			return delivered, errFinal
		}
	}
}

// follower applies frames to a tally by the stream's rules (docs/api.md,
// "The live stream"): a snapshot or final replaces it; a diff applies only
// on top of the frame with seq-1, and not to a hidden view it does not
// hide; anything else is a gap, answered by a resync and ignored until
// the snapshot arrives.
type follower struct {
	t       Tally
	synced  bool // holds a snapshot, and every diff since
	waiting bool // asked for a resync, not yet answered
}

// apply decodes one frame. It returns the tally when the frame changed it
// (a copy, the caller's), and whether to ask for a resync.
func (f *follower) apply(b []byte) (t Tally, ok, resync bool) {
	var fr api.Frame
	if json.Unmarshal(b, &fr) != nil {
		return Tally{}, false, false // not a frame (an ack, an error): not the tally's
	}
	switch fr.Type {
	case api.TypeSnapshot, api.TypeFinal:
		f.t = Tally{Poll: fr.Poll, Totals: maps.Clone(fr.Totals)}
		if f.t.Totals == nil {
			f.t.Totals = map[string]int64{}
		}
		f.synced, f.waiting = true, false
	case api.TypeDiff:
		if !f.synced || fr.Seq != f.t.Seq+1 || (f.t.Hidden && !fr.Hidden) {
			f.synced = false
			ask := !f.waiting
			f.waiting = true
			return Tally{}, false, ask
		}
		maps.Copy(f.t.Totals, fr.Totals)
	default: // heartbeat, and types a later node may send
		return Tally{}, false, false
	}
	f.t.Seq, f.t.Status, f.t.Total, f.t.Hidden, f.t.Frame = fr.Seq, fr.Status, fr.Total, fr.Hidden, fr
	if fr.Hidden {
		clear(f.t.Totals)
	}
	if fr.Type == api.TypeFinal {
		f.t.Final, f.t.Digest = true, fr.Digest
	}
	t = f.t
	t.Totals = maps.Clone(f.t.Totals)
	return t, true, false
}
