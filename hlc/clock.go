package hlc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrSkew is returned by Update when a remote timestamp is further ahead
	// of local wall time than the clock's MaxSkew.
	ErrSkew = errors.New("hlc: remote timestamp too far ahead")
	// ErrMalformed is returned when a timestamp cannot be parsed.
	ErrMalformed = errors.New("hlc: malformed timestamp")
	// ErrStore is returned when the high-water mark cannot be loaded or saved.
	ErrStore = errors.New("hlc: high-water store")
	// ErrMarkAhead: the stored high-water mark is further ahead of the
	// wall clock than a restart can leave it (MaxMarkAhead): the file is
	// damaged or the machine's clock went far back. Waiting it out would
	// stamp every vote in the future.
	ErrMarkAhead = errors.New("hlc: stored high-water mark far ahead of the wall clock")
)

// Store persists the clock's high-water mark (a wall time in milliseconds
// that no issued timestamp exceeds). Save must be durable when it returns.
type Store interface {
	Load() (int64, error)
	Save(wallMs int64) error
}

// Config configures a Clock. The zero value of every field except Replica
// means its default.
type Config struct {
	// Replica is written into every timestamp as the final tiebreak.
	Replica string
	// Now returns physical time; defaults to time.Now.
	Now func() time.Time
	// MaxSkew bounds how far ahead of local wall time a remote timestamp
	// may be before Update refuses it. Default 5s.
	MaxSkew time.Duration
	// Store, when set, persists a high-water mark so a restart resumes above
	// every timestamp issued before it.
	Store Store
	// Window is how far ahead of the current wall time the persisted mark
	// is set, so that Store.Save runs about once per Window. Default 1s.
	Window time.Duration
}

// Clock is a hybrid logical clock. It is safe for concurrent use.
type Clock struct {
	replica string
	now     func() time.Time
	maxSkew int64
	window  int64
	store   Store

	mu      sync.Mutex
	last    Timestamp // wall and logical of the newest issued or observed time
	ahead   int64     // the newest wall NowAfter issued past last (Issued)
	mark    int64     // persisted high-water mark; 0 without a store
	refused atomic.Uint64
}

// MaxMarkAhead is how far ahead of the wall clock a stored mark may be:
// a restart leaves it at most the skew a peer may push the clock (5 s by
// default) plus the persisted window ahead; a minute leaves room for a
// clock stepped back a little.
const MaxMarkAhead = time.Minute

// New returns a clock. With a Store, it loads the high-water mark and starts
// above it; a mark more than MaxMarkAhead ahead of the wall clock is
// ErrMarkAhead.
func New(cfg Config) (*Clock, error) {
	c := &Clock{
		replica: cfg.Replica,
		now:     cfg.Now,
		maxSkew: cfg.MaxSkew.Milliseconds(),
		window:  cfg.Window.Milliseconds(),
		store:   cfg.Store,
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.maxSkew <= 0 {
		c.maxSkew = 5000
	}
	if c.window <= 0 {
		c.window = 1000
	}
	if c.store != nil {
		mark, err := c.store.Load()
		if err != nil {
			return nil, fmt.Errorf("%w: cannot load: %w", ErrStore, err)
		}
		if ahead := time.Duration(mark-c.now().UnixMilli()) * time.Millisecond; ahead > MaxMarkAhead {
			return nil, fmt.Errorf("%w: %s (%s ahead; at most %s is a restart's)", ErrMarkAhead,
				time.UnixMilli(mark).UTC().Format(time.RFC3339), ahead.Round(time.Second), MaxMarkAhead)
		}
		// Everything issued before the restart had Wall < mark, so starting
		// at mark keeps the clock monotonic.
		c.last = Timestamp{Wall: mark}
		c.mark = mark
	}
	return c, nil
}

// Replica returns the replica id the clock stamps into its timestamps.
func (c *Clock) Replica() string { return c.replica }

// Now returns a timestamp greater than every timestamp this clock returned
// or observed before.
func (c *Clock) Now() (Timestamp, error) {
	phys := c.now().UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(phys, Timestamp{})
	if err := c.persist(); err != nil {
		return Timestamp{}, err
	}
	return Timestamp{Wall: c.last.Wall, Logical: c.last.Logical, Replica: c.replica}, nil
}

// NowAfter returns a timestamp greater than floor and than every
// timestamp this clock returned or observed before, without adopting
// floor: a vote is stamped after the voter's previous one (a stamp a
// client sent back, or one a peer gossiped) while the clock itself, and
// with it every other voter's stamps, stays where it was. A floor more
// than MaxSkew ahead of physical time is refused with ErrSkew.
func (c *Clock) NowAfter(floor Timestamp) (Timestamp, error) {
	phys := c.now().UnixMilli()
	if floor.Wall > phys && floor.Wall-phys > c.maxSkew {
		return Timestamp{}, fmt.Errorf("%w: %d.%d is %dms ahead of local time (max %dms)",
			ErrSkew, floor.Wall, floor.Logical, floor.Wall-phys, c.maxSkew)
	}
	ts, err := c.Now()
	if err != nil || floor.Wall < ts.Wall || floor.Wall == ts.Wall && floor.Logical < ts.Logical {
		return ts, err
	}
	ts.Wall, ts.Logical = floor.Wall, floor.Logical+1
	if floor.Logical == math.MaxUint32 {
		ts.Wall, ts.Logical = floor.Wall+1, 0
	}
	c.mu.Lock()
	c.ahead = max(c.ahead, ts.Wall)
	c.mu.Unlock()
	return ts, nil
}

// Issued returns the newest wall time the clock issued or observed,
// including the timestamps NowAfter issued ahead of the clock itself:
// whatever this node stamped is before Issued()+1.
func (c *Clock) Issued() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.last.Wall, c.ahead)
}

// MaxSkew is how far ahead of physical time a remote timestamp may be.
func (c *Clock) MaxSkew() time.Duration { return time.Duration(c.maxSkew) * time.Millisecond }

// Update folds a remote timestamp into the clock, so that later calls to Now
// order after it. A remote timestamp more than MaxSkew ahead of local
// physical time is refused with ErrSkew, counted, and not adopted.
func (c *Clock) Update(remote Timestamp) error {
	phys := c.now().UnixMilli()
	if remote.Wall > phys && remote.Wall-phys > c.maxSkew { // the first test keeps the subtraction from wrapping
		c.refused.Add(1)
		return fmt.Errorf("%w: %s is %dms ahead of local time (max %dms)",
			ErrSkew, remote, remote.Wall-phys, c.maxSkew)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(phys, remote)
	return c.persist()
}

// Ahead returns how far the clock's newest time is ahead of physical time:
// after a crash, the high-water mark it resumed from (up to one Window).
func (c *Clock) Ahead() time.Duration {
	phys := c.now().UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(max(c.last.Wall-phys, 0)) * time.Millisecond
}

// WaitOutMark blocks, on the process's own timer, until physical time has
// reached the time the clock resumed from, but at most one Window (beyond
// that physical time itself went back, and waiting cannot help). A node
// calls it before it serves, so that a vote it stamps after a quick restart
// is not stamped ahead of the wall clock: a change of mind sent a moment
// later to another node would otherwise order before it. It returns the
// time waited.
func (c *Clock) WaitOutMark(ctx context.Context) (time.Duration, error) {
	d := min(c.Ahead(), time.Duration(c.window)*time.Millisecond)
	if d <= 0 {
		return 0, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
		return d, nil
	}
}

// Close saves the exact high-water mark (the newest wall time plus one),
// so that a clean restart resumes at physical time and need not wait. The
// clock keeps working after Close; the next Now that reaches the mark
// saves a new one.
func (c *Clock) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store == nil {
		return nil
	}
	mark := c.last.Wall + 1
	if err := c.store.Save(mark); err != nil {
		return fmt.Errorf("%w: cannot save: %w", ErrStore, err)
	}
	c.mark = mark
	return nil
}

// Refused returns how many remote timestamps Update refused for skew.
func (c *Clock) Refused() uint64 { return c.refused.Load() }

// Last returns the newest timestamp the clock issued or observed.
func (c *Clock) Last() Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Timestamp{Wall: c.last.Wall, Logical: c.last.Logical, Replica: c.replica}
}

// advance is the HLC rule: the new wall time is the max of physical time,
// the previous time and the remote time; the logical counter resets when
// physical time alone is ahead, otherwise it counts past the largest
// logical value at that wall time. Callers hold c.mu.
func (c *Clock) advance(phys int64, remote Timestamp) {
	wall := max(phys, c.last.Wall, remote.Wall)
	var logical uint64 // wide, so a remote counter at its maximum cannot wrap to 0
	switch {
	case wall == c.last.Wall && wall == remote.Wall:
		logical = uint64(max(c.last.Logical, remote.Logical)) + 1
	case wall == c.last.Wall:
		logical = uint64(c.last.Logical) + 1
	case wall == remote.Wall:
		logical = uint64(remote.Logical) + 1
	}
	if logical > math.MaxUint32 {
		// Four billion events in one millisecond: step the wall instead.
		wall, logical = wall+1, 0
	}
	c.last = Timestamp{Wall: wall, Logical: uint32(logical)}
}

// persist saves a new high-water mark when the clock reached the old one.
// Callers hold c.mu.
func (c *Clock) persist() error {
	if c.store == nil || c.last.Wall < c.mark {
		return nil
	}
	mark := c.last.Wall + c.window
	if err := c.store.Save(mark); err != nil {
		return fmt.Errorf("%w: cannot save: %w", ErrStore, err)
	}
	c.mark = mark
	return nil
}
