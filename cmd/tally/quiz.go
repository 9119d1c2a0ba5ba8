package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"tally/api"
	"tally/client"
	"tally/ids"
	"tally/ledger"
	"tally/quiz"
)

const quizHelp = `usage: tally quiz <subcommand> [flags]

subcommands:
  create   --file QUIZ.json            create a quiz (admin; the body of
                                       POST /v1/quizzes, "-" for stdin)
  show     --quiz ID                   the quiz and its questions (every one,
                                       answers and counts, with the token)
  start    --quiz ID                   open the next question (admin)
  close    --quiz ID                   close the open question early (admin)
  reveal   --quiz ID                   show the last question's answer and
                                       counts; it enters the leaderboard (admin)
  end      --quiz ID                   close the open question, skip the rest (admin)
  result   --quiz ID [--cluster NAME] [EXPORT.ndjson…]
                                       the certified leaderboard; with the
                                       exports, reproduce it offline
  swarm    --quiz ID --participants N  measure a question's burst

Every subcommand takes --url URL (else $TALLY_URL; --node is its old
spelling); all but swarm take the admin token from --token-file FILE,
$TALLY_TOKEN or --token.

result shows a quiz's certified leaderboard. Given the exports of its questions
(tally ledger export --url URL… --poll ID-N for each question, every
replica), it reproduces the leaderboard offline: each question's records
reconcile to its certified digest (the first answer counts), every score
is recomputed from the node's measured time and the question's correct
options, and the ranking's digest must equal the node's. The question
definitions come from the node (the admin token: --token-file or
$TALLY_TOKEN).

swarm measures a question's burst from the participants' side: N sockets
on the quiz's stream answer within a few seconds of the question's frame
(tally quiz swarm --help).
`

func runQuiz(args []string, stdout, stderr io.Writer) int {
	return group("quiz", quizHelp, map[string]func([]string, io.Writer, io.Writer) int{
		"create": quizCreate,
		"show":   quizShow,
		"start":  quizAction("start"),
		"close":  quizAction("close"),
		"reveal": quizAction("reveal"),
		"end":    quizAction("end"),
		"result": quizResult,
		"swarm":  quizSwarm,
	}, args, stdout, stderr)
}

// quizResult runs `tally quiz result`: a quiz's questions, their results
// and its leaderboard. It is long because it is one command read top to
// bottom: its flags, the quiz, each question's result, the table.
func quizResult(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally quiz result", "tally quiz result --quiz ID [--url URL] [--cluster NAME] [--json] [EXPORT.ndjson…]")
	var nf nodeFlags
	nf.register(fs)
	id := fs.String("quiz", "", "quiz id")
	cluster := fs.String("cluster", "tally", "the cluster's name (its --cluster): participants are named by a hash keyed with it")
	asJSON := fs.Bool("json", false, "print the node's leaderboard as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *id == "" {
		return usageError(fs, stderr, "--quiz is required")
	}
	lb, code := call(nf, stderr, func(ctx context.Context, c *client.Client) (api.Leaderboard, error) {
		return c.Leaderboard(ctx, *id, 100, "")
	})
	if code != 0 {
		return code
	}
	if *asJSON {
		writeCompactJSON(stdout, lb)
	} else {
		printLeaderboard(stdout, lb)
	}
	if fs.NArg() == 0 {
		return 0
	}
	qv, code := call(nf, stderr, func(ctx context.Context, c *client.Client) (api.QuizView, error) { return c.Quiz(ctx, *id) })
	if code != 0 {
		return code
	}
	in, err := openInputs(fs.Args(), stderr, "reproducing")
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	byPoll := map[string][]ledger.Record{}
	for i := range in.files {
		for r, err := range in.stream(i) {
			if err != nil {
				in.close()
				fmt.Fprintf(stderr, "tally: %v\n", err)
				return 1
			}
			byPoll[r.Poll] = append(byPoll[r.Poll], r)
		}
	}
	in.close()
	key := ids.ClusterHashKey(*cluster)
	var answers []quiz.Answer
	for _, qi := range lb.Counted {
		if qi < 0 || qi >= len(qv.Questions) || len(qv.Questions[qi].Correct) == 0 {
			fmt.Fprintf(stderr, "tally: question %d is not in the host's view (is the token the admin's?)\n", qi+1)
			return 1
		}
		q := qv.Questions[qi]
		cert, code := call(nf, stderr, func(ctx context.Context, c *client.Client) (api.ResultView, error) { return c.Result(ctx, q.Poll) })
		if code != 0 {
			return code
		}
		rc := ledger.ReconcileConfig{Poll: q.Poll, FirstWins: true}
		if cert.Detail != nil {
			rc.ClosesAt = cert.Detail.ClosesAt
			if r := cert.Detail.Result; r != nil {
				rc.CloseRule = r.CloseRule
			}
		}
		res, err := ledger.ReconcileWith(rc, sliceRecords(byPoll[q.Poll]))
		if err != nil {
			fmt.Fprintf(stderr, "tally: question %d: the exports do not reconcile: %v\n", qi+1, err)
			return 1
		}
		if res.Digest != cert.Digest {
			fmt.Fprintf(stdout, "NOT REPRODUCED: question %d's exports give digest %s, certified %s (are every replica's exports given?)\n", qi+1, res.Digest, cert.Digest)
			return 1
		}
		for _, a := range res.Answers {
			correct := false
			for _, c := range q.Correct {
				correct = correct || c == a.Option
			}
			if want := quiz.Score(correct, q.Points, a.ElapsedMs, q.LimitMs); want != a.Score {
				fmt.Fprintf(stdout, "NOT REPRODUCED: question %d: an answer scored %d, the rules give %d for %d ms\n", qi+1, a.Score, want, a.ElapsedMs)
				return 1
			}
			answers = append(answers, quiz.Answer{Participant: fmt.Sprintf("%016x", ids.Hash(key, a.Voter)), Question: qi,
				Option: a.Option, Correct: correct, ElapsedMs: a.ElapsedMs, Score: a.Score, Name: a.Name})
		}
	}
	mine := quiz.Digest(*id, lb.Counted, quiz.Rank(answers))
	if mine != lb.Digest {
		fmt.Fprintf(stdout, "\nNOT REPRODUCED: the exports rank to digest %s, the node's is %s\n", mine, lb.Digest)
		return 1
	}
	fmt.Fprintf(stdout, "\nreproduced: %d questions' exports give the same scores and the leaderboard digest %s\n", len(lb.Counted), mine)
	return 0
}

func printLeaderboard(w io.Writer, lb api.Leaderboard) {
	state := "not final"
	if lb.Final {
		state = "final"
	}
	fmt.Fprintf(w, "quiz %s: %d participants, questions counted %v, pending %v (%s)\ndigest %s\n\n", lb.Quiz, lb.Participants, lb.Counted, lb.Pending, state, lb.Digest)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tNAME\tPARTICIPANT\tSCORE\tCORRECT\tTIME")
	for _, s := range lb.Standings {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%.1fs\n", s.Rank, s.Name, s.Participant, s.Score, s.Correct, float64(s.ElapsedMs)/1000)
	}
	tw.Flush()
}

func sliceRecords(recs []ledger.Record) func(func(ledger.Record, error) bool) {
	return func(yield func(ledger.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}
