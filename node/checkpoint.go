package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"tally/ingest"
	"tally/ledger"
	"tally/state"
)

const checkpointFile = "checkpoint" // the vote state at one instant; see state.Checkpoint

// checkpoints keeps the node's vote state where a restart finds it: the
// checkpoint file in the data dir (the state at one instant, so a start
// replays only the ledger after it) and the merged tallies in the ledger's
// metadata (what a restart knows of the other replicas).
type checkpoints struct {
	dataDir string
	every   time.Duration // CheckpointEvery; 0: none but the one at shutdown
	replica string
	ledger  *ledger.Ledger
	state   *state.State
	ingest  *ingest.Pipeline
	log     *slog.Logger
	m       *nodeMetrics

	// whole: the tallies kept hold all the last run showed (it stopped
	// cleanly, or there was none); set by loadTallies.
	whole bool
	// unsynced: tallies were written since the last synced write
	// (keepTallies; its loop alone).
	unsynced bool
}

// heads is this replica's chain length per poll.
func (c *checkpoints) heads(poll string) (uint64, error) {
	n, _, err := c.ledger.Head(poll, c.replica)
	return n, err
}

// restore replays the ledger into memory: from the checkpoint and the
// records after it when there is a usable one, else from the start. It
// returns the records replayed.
func (c *checkpoints) restore() (int, error) {
	f, err := os.Open(filepath.Join(c.dataDir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return c.ingest.Replay(c.ledger.Replay(), c.replica)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	applied, err := c.state.LoadCheckpoint(f, c.heads)
	if errors.Is(err, state.ErrLedgerBehind) {
		return 0, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if err != nil {
		c.log.Warn("checkpoint not usable; replaying the whole ledger", "err", err)
		return c.ingest.Replay(c.ledger.Replay(), c.replica)
	}
	c.log.Info("checkpoint loaded", "polls", len(applied))
	return c.ingest.Replay(c.ledger.ReplayAfter(c.replica, applied), c.replica)
}

// write writes the vote state to the data dir: a temporary file,
// fsynced, renamed over the old one.
func (c *checkpoints) write() error {
	start := time.Now()
	var polls, voters int
	err := writeAtomic(c.dataDir, checkpointFile, func(w io.Writer) (err error) {
		polls, voters, err = c.ingest.WriteCheckpoint(w, c.heads)
		return err
	})
	if err != nil {
		return fmt.Errorf("node: checkpoint: %w", err)
	}
	c.m.checkpointSeconds.Set(time.Since(start).Seconds())
	c.log.Debug("checkpoint written", "polls", polls, "voters", voters, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// loop writes a checkpoint every CheckpointEvery until ctx ends.
func (c *checkpoints) loop(ctx context.Context) {
	if c.every <= 0 {
		return
	}
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.safeWrite(); err != nil {
				c.m.checkpointFails.Inc()
				c.log.Error("checkpoint failed; will retry at the next tick", "err", err)
			}
		}
	}
}

// safeWrite is write with a panic turned into an error: a bug in
// the background write must not take the node down (the ledger still holds
// every record; the next start replays more of it).
func (c *checkpoints) safeWrite() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("node: checkpoint panicked: %v\n%s", v, debug.Stack())
		}
	}()
	return c.write()
}

// talliesEvery is how often the polls' merged tallies (every replica's
// counts and record counts) are kept in the ledger's metadata, when they
// changed (state.SaveTallies), and synced: what a restart knows of the
// other replicas before anyone answers it, and the lowest number it puts
// on air.
const talliesEvery = 100 * time.Millisecond

// runMark is the ledger metadata entry that says how the last run ended:
// markRunning from the start until a clean stop has kept the tallies a
// last time, after it stopped showing them; then markStopped. A start
// that finds markRunning knows the last run ended without that last keep
// (kill -9, an OOM, a power cut): what gossip brought in its last
// talliesEvery was on air and may be in no kept tally, so it answers no
// one until the other replicas gave that back (catchup.go).
const runMark = "node/run"

const (
	markRunning = "running"
	markStopped = "stopped"
)

// loadTallies merges the tallies kept by the last run into the state,
// after the replay: the other replicas' counts and record counts. Then it
// reads how the last run ended (whole) and marks this one running, synced,
// before anything is shown.
func (c *checkpoints) loadTallies() error {
	loaded, err := c.state.LoadTallies()
	if err != nil {
		c.log.Error("some kept tallies could not be read; those polls know the other replicas only once gossip brings them", "err", err)
	}
	if loaded > 0 {
		c.log.Info("kept tallies loaded: the other replicas' counts as last known", "polls", loaded)
	}
	mark, found, merr := c.ledger.Meta(runMark)
	if merr != nil {
		return fmt.Errorf("node: cannot read the run mark: %w", merr)
	}
	// Whole: the last run stopped cleanly, or kept nothing (a new data
	// dir). A data dir of a version without the mark that kept tallies, and
	// one restored from a backup (taken from a running node), are not.
	c.whole = err == nil && (found && string(mark) == markStopped || !found && loaded == 0)
	if err := c.ledger.PutMeta(runMark, []byte(markRunning)); err != nil {
		return fmt.Errorf("node: cannot mark the run started: %w", err)
	}
	return nil
}

// keepTallies writes the tallies that changed (state.SaveTallies) and
// makes them durable. SaveTallies writes most of them unsynced, into
// Pebble's write-ahead log buffer, which a killed process loses; a synced
// write of the run mark follows, and as the log is written in order, it
// makes every write before it durable. One fsync a talliesEvery in which
// a tally changed.
func (c *checkpoints) keepTallies() error {
	n, err := c.state.SaveTallies()
	c.unsynced = c.unsynced || n > 0
	if err != nil {
		return fmt.Errorf("node: cannot keep the tallies: %w", err)
	}
	if !c.unsynced {
		return nil
	}
	if err := c.ledger.PutMeta(runMark, []byte(markRunning)); err != nil {
		return fmt.Errorf("node: cannot sync the kept tallies: %w", err)
	}
	c.unsynced = false
	return nil
}

// keepLast keeps the tallies a last time at a clean stop, once nothing
// shows them any more, and marks the run stopped: the next start shows
// them at once.
func (c *checkpoints) keepLast() error {
	if _, err := c.state.SaveTallies(); err != nil {
		return fmt.Errorf("node: cannot keep the tallies: %w", err)
	}
	if err := c.ledger.PutMeta(runMark, []byte(markStopped)); err != nil {
		return fmt.Errorf("node: cannot mark the run stopped: %w", err)
	}
	return nil
}

// saveTalliesLoop keeps the tallies every talliesEvery until ctx ends.
func (c *checkpoints) saveTalliesLoop(ctx context.Context) {
	t := time.NewTicker(talliesEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := c.keepTallies()
		switch {
		case err != nil && !failing:
			c.log.Error("cannot keep the tallies; will retry", "err", err)
		case err == nil && failing:
			c.log.Info("tallies kept again")
		}
		failing = err != nil
	}
}
