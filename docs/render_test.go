package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// Every table row written in the project's Markdown renders as a table
// row (GitHub's table extension): a row cut off from its table by a
// paragraph, or one with a stray pipe, shows as literal "|" text (issue
// 46 found the quiz rows of the README's views table so).
func TestEveryTableRowRenders(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md", "../BENCHMARKS.md", "../clients/js/README.md")
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var html bytes.Buffer
		if err := md.Convert(src, &html); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rows, first := tableLines(string(src))
		if got := strings.Count(html.String(), "<tr>"); got < rows {
			t.Errorf("%s: %d table rows written, %d rendered as rows (the first table line: %d)", f, rows, got, first)
		}
	}
}

// delimiter matches a table's delimiter row (| --- | :-: |).
var delimiter = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)

// tableLines counts the lines outside code blocks that start a table row
// (a pipe at the start of the line, not the delimiter row), and returns
// the line number of the first.
func tableLines(src string) (rows, first int) {
	fenced := false
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "|") || delimiter.MatchString(trimmed) {
			continue
		}
		if rows == 0 {
			first = i + 1
		}
		rows++
	}
	return rows, first
}
