package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"tally/state"
)

const checkpointFile = "checkpoint" // the vote state at one instant; see state.Checkpoint

// heads is this replica's chain length per poll.
func (n *Node) heads(poll string) (uint64, error) {
	c, _, err := n.ledger.Head(poll, n.replica)
	return c, err
}

// restore replays the ledger into memory: from the checkpoint and the
// records after it when there is a usable one, else from the start. It
// returns the records replayed.
func (n *Node) restore() (int, error) {
	f, err := os.Open(filepath.Join(n.cfg.DataDir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return n.ingest.Replay(n.ledger.Replay(), n.replica)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	applied, err := n.state.LoadCheckpoint(f, n.heads)
	if errors.Is(err, state.ErrLedgerBehind) {
		return 0, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if err != nil {
		n.log.Warn("checkpoint not usable; replaying the whole ledger", "err", err)
		return n.ingest.Replay(n.ledger.Replay(), n.replica)
	}
	n.log.Info("checkpoint loaded", "polls", len(applied))
	return n.ingest.Replay(n.ledger.ReplayAfter(n.replica, applied), n.replica)
}

// checkpoint writes the vote state to the data dir: a temporary file,
// fsynced, renamed over the old one.
func (n *Node) checkpoint() error {
	start := time.Now()
	var polls, voters int
	err := writeAtomic(n.cfg.DataDir, checkpointFile, func(w io.Writer) (err error) {
		polls, voters, err = n.ingest.WriteCheckpoint(w, n.heads)
		return err
	})
	if err != nil {
		return fmt.Errorf("node: checkpoint: %w", err)
	}
	n.m.checkpointSeconds.Set(time.Since(start).Seconds())
	n.log.Debug("checkpoint written", "polls", polls, "voters", voters, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// checkpointLoop writes a checkpoint every CheckpointEvery until ctx ends.
func (n *Node) checkpointLoop(ctx context.Context) {
	if n.cfg.CheckpointEvery <= 0 {
		return
	}
	t := time.NewTicker(n.cfg.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := n.safeCheckpoint(); err != nil {
				n.m.checkpointFails.Inc()
				n.log.Error("checkpoint failed; will retry at the next tick", "err", err)
			}
		}
	}
}

// safeCheckpoint is checkpoint with a panic turned into an error: a bug in
// the background write must not take the node down (the ledger still holds
// every record; the next start replays more of it).
func (n *Node) safeCheckpoint() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("node: checkpoint panicked: %v\n%s", v, debug.Stack())
		}
	}()
	return n.checkpoint()
}

// talliesEvery is how often the polls' merged tallies (every replica's
// counts and record counts) are kept in the ledger's metadata, when they
// changed (state.SaveTallies): what a restart knows of the other replicas
// before anyone answers it, and the lowest number it puts on air.
const talliesEvery = 100 * time.Millisecond

// loadTallies merges the tallies kept by the last run into the state,
// after the replay: the other replicas' counts and record counts.
func (n *Node) loadTallies() {
	loaded, err := n.state.LoadTallies()
	if err != nil {
		n.log.Error("some kept tallies could not be read; those polls know the other replicas only once gossip brings them", "err", err)
	}
	if loaded > 0 {
		n.log.Info("kept tallies loaded: the other replicas' counts as last known", "polls", loaded)
	}
}

// saveTalliesLoop keeps the tallies every talliesEvery until ctx ends.
func (n *Node) saveTalliesLoop(ctx context.Context) {
	t := time.NewTicker(talliesEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := n.state.SaveTallies()
		switch {
		case err != nil && !failing:
			n.log.Error("cannot keep the tallies; will retry", "err", err)
		case err == nil && failing:
			n.log.Info("tallies kept again")
		}
		failing = err != nil
	}
}
