package state

import (
	"cmp"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"tally/crdt"
	"tally/hlc"
	"tally/poll"
)

// Definitions is the definitions store: what a host wrote and what the
// cluster decided about each poll, persisted in the Store and replicated
// by gossip. The counts live beside it, in State.
type Definitions struct {
	store    Store
	maxPolls int
	onDefine func(crdt.Register[poll.Definition]) // a definition is about to be set (State.define)
	onForget func(id string)                      // a poll left memory (State.drop)

	defMu sync.Mutex // serializes definition writes: the join reads and replaces, and the bound on polls holds

	mu   sync.RWMutex
	defs crdt.Map[string, poll.Definition]

	certs map[string]*Certificate // guarded by mu
	// quizzes indexes the quiz questions: quiz → its question polls
	// (quiz.go); guarded by mu.
	quizzes map[string]map[string]struct{}

	setAside  map[string]error             // stored definitions that no longer validate; set by New only
	forgotten map[string]struct{}          // polls dropped from memory (Forget); guarded by mu
	keys      map[string]ed25519.PublicKey // replica → its signing key; guarded by mu
}

// load reads the tombstones, keys, definitions and certificates the
// store holds; called by New.
func (d *Definitions) load() error {
	d.loadForgotten()
	d.loadKeys()
	for name, value := range d.store.MetaWithPrefix(pollPrefix) {
		if _, gone := d.forgotten[name[len(pollPrefix):]]; gone {
			continue
		}
		var reg crdt.Register[poll.Definition]
		if err := json.Unmarshal(value, &reg); err != nil {
			return fmt.Errorf("%w: cannot decode %s: %w", ErrStore, name, err)
		}
		reg.Value.Upgrade()
		if err := reg.Value.Validate(); err != nil {
			// Written by an earlier version with looser rules: the node
			// still starts; the poll is left out and reported.
			if d.setAside == nil {
				d.setAside = map[string]error{}
			}
			d.setAside[name[len(pollPrefix):]] = err
			continue
		}
		d.set(reg)
	}
	return d.loadCertificates()
}

// SetAside returns the stored definitions New left out because they no
// longer pass validation (poll id → why), for the node to report.
func (d *Definitions) SetAside() map[string]error { return d.setAside }

// PutPoll writes a definition at ts (a create, or an amended version such
// as a close, an extend or a reveal, written here or gossiped from another
// region), joined with the version held (joinDefinitions). It persists the
// result before applying it and reports whether the held definition
// changed.
func (d *Definitions) PutPoll(def poll.Definition, ts hlc.Timestamp) (bool, error) {
	def.Upgrade() // a peer of an earlier version wrote it
	if err := def.Validate(); err != nil {
		return false, err
	}
	in := crdt.Register[poll.Definition]{TS: ts, Value: def}
	d.defMu.Lock()
	defer d.defMu.Unlock()
	d.mu.RLock()
	cur, ok := d.defs.Get(def.ID)
	_, gone := d.forgotten[def.ID]
	held := d.defs.Len()
	d.mu.RUnlock()
	if gone {
		return false, nil // a forgotten poll stays forgotten, whoever still gossips it
	}
	if !ok && held >= d.maxPolls {
		return false, fmt.Errorf("%w: %d held, at most %d", ErrTooManyPolls, held, d.maxPolls)
	}
	if def.CloseStamp == nil && !ok {
		in.Value.CloseStamp = &ts // a creation writes the close too
	}
	reg := in
	if ok {
		reg = joinDefinitions(cur, in)
		if reg.TS == cur.TS && sameDefinition(reg.Value, cur.Value) {
			return false, nil // nothing new: an older or the same write
		}
		if err := reg.Value.Validate(); err != nil {
			return false, err
		}
	}
	if d.store != nil {
		b, err := json.Marshal(reg)
		if err != nil {
			return false, fmt.Errorf("%w: %w", ErrStore, err)
		}
		if err := d.store.PutMeta(poll.StoreKey(def.ID), b); err != nil {
			return false, fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	d.set(reg)
	return true, nil
}

// set makes reg the definition held, its counts ready first. Callers hold
// defMu or run before the store is shared (load).
func (d *Definitions) set(reg crdt.Register[poll.Definition]) {
	d.onDefine(reg)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.defs.Replace(reg.Value.ID, reg)
	if q := reg.Value.Quiz; q != nil {
		if d.quizzes == nil {
			d.quizzes = map[string]map[string]struct{}{}
		}
		if d.quizzes[q.Quiz] == nil {
			d.quizzes[q.Quiz] = map[string]struct{}{}
		}
		d.quizzes[q.Quiz][reg.Value.ID] = struct{}{}
	}
}

// Poll returns a poll's definition.
func (d *Definitions) Poll(id string) (poll.Definition, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	reg, ok := d.defs.Get(id)
	return reg.Value, ok
}

// Polls returns every definition, sorted by opening time then id.
func (d *Definitions) Polls() []poll.Definition {
	d.mu.RLock()
	out := make([]poll.Definition, 0, d.defs.Len())
	for _, id := range d.defs.Keys() {
		reg, _ := d.defs.Get(id)
		out = append(out, reg.Value)
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b poll.Definition) int {
		if c := cmp.Compare(a.OpensAt, b.OpensAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// joinDefinitions merges two versions of one poll's definition so that
// amendments written at different regions at about the same time all
// survive, in whatever order the versions arrive:
//
//   - the schedule (OpensAt, ClosesAt, a quiz question's Started and Skipped) is
//     the one written last, by
//     its own stamp (CloseStamp; a version without one set it when it was
//     written whole): a reveal written later elsewhere does not undo an
//     extend, or a quiz question's start;
//   - a reveal is never undone: the poll is hidden only while every
//     version says so (nothing hides a poll after its creation);
//   - everything else is fixed at creation and comes from the newer
//     version, whose stamp the result keeps.
//
// The join is commutative, associative and idempotent, so every node
// ends with the same definition from the same set of writes.
func joinDefinitions(a, b crdt.Register[poll.Definition]) crdt.Register[poll.Definition] {
	newer, older := a, b
	if newer.TS.Less(older.TS) {
		newer, older = older, newer
	}
	out := newer
	out.Value.Hidden = a.Value.Hidden && b.Value.Hidden
	if closeStamp(older).Compare(closeStamp(newer)) > 0 {
		out.Value.OpensAt, out.Value.ClosesAt = older.Value.OpensAt, older.Value.ClosesAt
		if q, o := out.Value.Quiz, older.Value.Quiz; q != nil && o != nil && (q.Started != o.Started || q.Skipped != o.Skipped) {
			started := *q // the newer version's other quiz fields, the older's start
			started.Started, started.Skipped = o.Started, o.Skipped
			out.Value.Quiz = &started
		}
		out.Value.CloseStamp = older.Value.CloseStamp
		if out.Value.CloseStamp == nil {
			ts := older.TS // the older version's close was written with it
			out.Value.CloseStamp = &ts
		}
	}
	return out
}

// closeStamp is when a version's close was written.
func closeStamp(r crdt.Register[poll.Definition]) hlc.Timestamp {
	if r.Value.CloseStamp != nil {
		return *r.Value.CloseStamp
	}
	return r.TS
}

func sameDefinition(a, b poll.Definition) bool { return reflect.DeepEqual(a, b) }
