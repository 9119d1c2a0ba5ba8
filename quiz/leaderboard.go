package quiz

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// Answer is one participant's answer that counts for one question (their
// first: docs/quiz.md), as ingest scored it.
type Answer struct {
	Participant string // the participant's voter id
	Question    int    // its index in the quiz, from 0
	Option      string
	Correct     bool
	ElapsedMs   int64 // measured by the node that received it
	Score       int64
	Name        string // the display name given with it; "" for none
}

// Standing is one participant's place on a leaderboard.
type Standing struct {
	Rank        int    `json:"rank"` // 1 for the first; participants tied share a rank (1, 2, 2, 4)
	Participant string `json:"participant"`
	Name        string `json:"name,omitempty"` // the display name of their latest named answer
	Score       int64  `json:"score"`
	Correct     int    `json:"correct"`    // correct answers
	ElapsedMs   int64  `json:"elapsed_ms"` // the sum of the correct answers' times
	Answered    int    `json:"answered"`
}

// Rank adds up each participant's answers and orders them: by score
// (higher first), then by correct answers (more first), then by the time
// those took in all (less first). Participants equal on all three share a
// rank and are listed by participant id, so the order is the same
// wherever it is computed.
func Rank(answers []Answer) []Standing {
	by := map[string]*Standing{}
	named := map[string]int{} // participant → question index of the name kept
	for _, a := range answers {
		s := by[a.Participant]
		if s == nil {
			s = &Standing{Participant: a.Participant}
			by[a.Participant] = s
		}
		if i, ok := named[a.Participant]; a.Name != "" && (!ok || a.Question > i) {
			s.Name, named[a.Participant] = a.Name, a.Question
		}
		s.Answered++
		s.Score += a.Score
		if a.Correct {
			s.Correct++
			s.ElapsedMs += a.ElapsedMs
		}
	}
	out := make([]Standing, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Standing) int {
		if c := compare(a, b); c != 0 {
			return c
		}
		return cmp.Compare(a.Participant, b.Participant)
	})
	for i := range out {
		if i > 0 && compare(out[i-1], out[i]) == 0 {
			out[i].Rank = out[i-1].Rank
		} else {
			out[i].Rank = i + 1
		}
	}
	return out
}

// compare orders two standings by the ranking rules, ties as 0.
func compare(a, b Standing) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Correct, a.Correct); c != 0 {
		return c
	}
	return cmp.Compare(a.ElapsedMs, b.ElapsedMs)
}

// Digest is the SHA-256, in hex, of a canonical text of a whole ranking
// and the questions it counts: what a certified leaderboard is checked
// by. Any two computations from the same answers give the same digest.
func Digest(quizID string, counted []int, standings []Standing) string {
	h := sha256.New()
	fmt.Fprintf(h, "tally-leaderboard v1\nquiz %q\n", quizID)
	for _, q := range counted {
		fmt.Fprintf(h, "question %d\n", q)
	}
	for _, s := range standings {
		fmt.Fprintf(h, "standing %d %q %q %d %d %d %d\n", s.Rank, s.Participant, s.Name, s.Score, s.Correct, s.ElapsedMs, s.Answered)
	}
	return hex.EncodeToString(h.Sum(nil))
}
