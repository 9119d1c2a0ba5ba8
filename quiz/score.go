package quiz

// Score is the points an answer earns, as Kahoot scores: a correct answer
// given instantly earns all the points, one given at the time limit half of
// them, linearly in between; a wrong answer earns nothing. elapsedMs is the
// time the serving node measured from showing the question to the
// participant to receiving the answer (docs/quiz.md); it is clamped to
// [0, limitMs]. The result is round-half-up of
//
//	points × (1 − elapsed / (2 × limit))
//
// in integers, so every node and the auditor's tool get the same number.
// points and limitMs are those of a valid Question (at most 10,000 and
// 600,000), which keeps every product within int64.
func Score(correct bool, points, elapsedMs, limitMs int64) int64 {
	if !correct || points <= 0 || limitMs <= 0 {
		return 0
	}
	e := min(max(elapsedMs, 0), limitMs)
	return (points*(2*limitMs-e) + limitMs) / (2 * limitMs)
}
