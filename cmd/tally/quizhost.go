package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"tally/api"
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
	if !json.Valid(body) {
		fmt.Fprintf(stderr, "tally: %s is not JSON\n", *file)
		return 1
	}
	return callQuiz(nf, "POST", "/v1/quizzes", json.RawMessage(body), *asJSON, stdout, stderr)
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
	if verb == "show" {
		return callQuiz(nf, "GET", "/v1/quizzes/"+url.PathEscape(*id), nil, *asJSON, stdout, stderr)
	}
	return callQuiz(nf, "POST", "/v1/quizzes/"+url.PathEscape(*id)+"/"+verb, nil, *asJSON, stdout, stderr)
}

// callQuiz sends one request whose answer is a quiz and prints it.
func callQuiz(nf nodeFlags, method, path string, body any, asJSON bool, stdout, stderr io.Writer) int {
	return callPrint(nf, method, path, body, asJSON, stdout, stderr, printQuiz)
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
