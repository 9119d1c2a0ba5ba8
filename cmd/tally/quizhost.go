package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"tally/api"
	"tally/client"
	"tally/quiz"
)

// The host's quiz commands: create a quiz from its JSON definition, show
// it, and run it (start, close, reveal, end), as the host view's buttons
// do (docs/api.md, Quizzes).

func quizCreate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally quiz create", "tally quiz create --file QUIZ.json [--json]")
	var nf nodeFlags
	nf.register(fs)
	file := fs.String("file", "", `the quiz's definition, the body of POST /v1/quizzes ("-": standard input)`)
	asJSON := fs.Bool("json", false, "print the node's answer as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *file == "" || fs.NArg() > 0 {
		return usageError(fs, stderr, "--file is required, and nothing else")
	}
	var (
		body []byte
		err  error
	)
	if *file == "-" {
		body, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		body, err = os.ReadFile(*file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	var q quiz.Quiz
	if err := api.Unmarshal(body, &q); err != nil {
		if e := (*api.Error)(nil); errors.As(err, &e) {
			err = errors.New(e.Message) // the reason, without the API's code: nothing was sent
		}
		fmt.Fprintf(stderr, "tally: %s: %v\n", *file, err)
		return 1
	}
	return show(nf, *asJSON, stdout, stderr, printQuiz, func(ctx context.Context, c *client.Client) (api.QuizView, error) {
		return c.CreateQuiz(ctx, q)
	})
}

func quizShow(args []string, stdout, stderr io.Writer) int {
	return quizCall("show", args, stdout, stderr)
}

// quizAction returns the command that starts, closes, reveals or ends a
// quiz.
func quizAction(verb string) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int { return quizCall(verb, args, stdout, stderr) }
}

// quizCall shows a quiz (verb "show") or runs a host's action on it.
func quizCall(verb string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally quiz "+verb, "tally quiz "+verb+" --quiz ID [--json]")
	var nf nodeFlags
	nf.register(fs)
	id := fs.String("quiz", "", "quiz id")
	asJSON := fs.Bool("json", false, "print the node's answer as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *id == "" || fs.NArg() > 0 {
		return usageError(fs, stderr, "--quiz is required, and nothing else")
	}
	return show(nf, *asJSON, stdout, stderr, printQuiz, func(ctx context.Context, c *client.Client) (api.QuizView, error) {
		if verb == "show" {
			return c.Quiz(ctx, *id)
		}
		return c.QuizStep(ctx, *id, verb)
	})
}

func printQuiz(w io.Writer, v api.QuizView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "quiz\t%s\ntitle\t%s\nstatus\t%s\nstarted\t%d of %d\n\n", v.ID, v.Title, v.Status, v.Started, v.Total)
	fmt.Fprintln(tw, "#\tPOLL\tSTATUS\tCLOSES\tANSWERS\tCORRECT\tTOTALS\tTEXT")
	for _, q := range v.Questions {
		status := string(q.Status)
		if !q.Started {
			status = "not started"
		}
		if q.Skipped {
			status = "skipped"
		}
		closes := "-"
		if q.Started {
			closes = fmtMs(q.ClosesAt)
		}
		var totals []string
		for _, o := range q.Options {
			if n, ok := q.Totals[o.ID]; ok {
				totals = append(totals, fmt.Sprintf("%s=%d", o.ID, n))
			}
		}
		if !q.Revealed {
			status += " (hidden)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", q.Index+1, q.Poll, status, closes, q.Answers,
			strings.Join(q.Correct, ","), strings.Join(totals, " "), q.Text)
	}
	tw.Flush()
}
