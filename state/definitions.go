package state

import (
	"reflect"

	"tally/crdt"
	"tally/hlc"
	"tally/poll"
)

// joinDefinitions merges two versions of one poll's definition so that
// amendments written at different regions at about the same time all
// survive, in whatever order the versions arrive:
//
//   - the schedule (OpensAt, ClosesAt and a quiz question's Started) is
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
		if q := out.Value.Quiz; q != nil && older.Value.Quiz != nil && q.Started != older.Value.Quiz.Started {
			started := *q // the newer version's other quiz fields, the older's start
			started.Started = older.Value.Quiz.Started
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
