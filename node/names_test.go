package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/poll"
	"tally/state"
)

// An edge refuses a quiz answer whose name looks like another
// participant's among the names it knows (its sockets' joins, the lobby
// reports it heard), as the full node would, before relaying it; the
// participant's own name, another quiz's and a poll it does not know go
// through to the full node.
func TestEdgeRefusesALookAlikeAnswerName(t *testing.T) {
	now := time.Now()
	st, err := state.New(state.Config{Replica: "edge-1"})
	if err != nil {
		t.Fatal(err)
	}
	q := poll.Definition{ID: "q-1", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now.Add(-time.Second).UnixMilli(), ClosesAt: now.Add(20 * time.Second).UnixMilli(),
		Quiz: &poll.QuizQuestion{Quiz: "q", Correct: []string{"a"}, Points: 1000, LimitMs: 20_000, Started: true}}
	if _, err := st.Defs.PutPoll(q, hlc.Timestamp{Wall: now.UnixMilli(), Replica: "edge-1"}); err != nil {
		t.Fatal(err)
	}
	// Ann joined at a full node; its lobby report reached the edge.
	st.Audience.MergeJoiners("q-1", "eu-1", []state.Joiner{{Name: "Ann", AtMs: now.UnixMilli(), Seq: 1, Holder: st.Hash("ann")}}, now.UnixMilli())
	check := checkAtEdge(st, time.Now)
	answer := func(voter, name string) []api.Vote {
		return []api.Vote{{Option: "a", Voter: voter, Idem: voter, Name: name}}
	}
	var e *api.Error
	if err := check("q-1", answer("mallory", "Аnn")); !errors.As(err, &e) || e.Status != 400 || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, "looks like another participant") {
		t.Fatalf("a look-alike of Ann's name: %v", err)
	}
	for _, ok := range [][]api.Vote{answer("ann", "Ann"), answer("zoe", "Zoë"), answer("mallory", "")} {
		if err := check("q-1", ok); err != nil {
			t.Errorf("%+v refused: %v", ok, err)
		}
	}
	if err := check("unknown", answer("mallory", "Аnn")); err != nil {
		t.Errorf("a poll the edge does not know: %v", err)
	}
}
