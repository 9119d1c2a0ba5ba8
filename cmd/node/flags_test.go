package main

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"tally/node"
)

// TestREADMEFlagTableMatchesTheFlags holds the flag table of
// docs/running.md (which the README points to) against the flags the node registers: every flag is
// in it, every flag it names exists, and a default written as a plain
// value is the flag's default. So the two cannot drift.
func TestREADMEFlagTableMatchesTheFlags(t *testing.T) {
	readme, err := os.ReadFile("../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	fs, _, _ := newFlagSet(&cfg)
	table := flagTable(t, string(readme))
	flagName := regexp.MustCompile("`--([a-z0-9-]+)`")
	documented := map[string]bool{}
	for _, row := range table {
		var names []string
		for _, m := range flagName.FindAllStringSubmatch(row[0], -1) {
			names = append(names, m[1])
			documented[m[1]] = true
			if fs.Lookup(m[1]) == nil {
				t.Errorf("docs/running.md documents --%s, which the node does not have", m[1])
			}
		}
		for _, m := range flagName.FindAllStringSubmatch(row[2], -1) {
			documented[m[1]] = true // a companion named in the meaning (--admin-token-file)
		}
		checkDefaults(t, fs, names, row[1])
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !documented[f.Name] && f.Name != "version" {
			t.Errorf("--%s is not in the flag table of docs/running.md", f.Name)
		}
	})
}

// flagTable returns the cells of the rows of the table headed
// "| flag | default | meaning |".
func flagTable(t *testing.T, readme string) [][3]string {
	_, rest, ok := strings.Cut(readme, "| flag | default | meaning |\n| --- | --- | --- |\n")
	if !ok {
		t.Fatal("docs/running.md has no flag table")
	}
	var rows [][3]string
	for line := range strings.Lines(rest) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("the flag table of docs/running.md row with %d cells: %s", len(cells), line)
		}
		rows = append(rows, [3]string{cells[0], cells[1], cells[2]})
	}
	if len(rows) < 20 {
		t.Fatalf("the flag table of docs/running.md has %d rows", len(rows))
	}
	return rows
}

// checkDefaults compares a row's default cell, when it is plain values
// (one per flag, comma-separated), with the flags' defaults.
func checkDefaults(t *testing.T, fs *flag.FlagSet, names []string, cell string) {
	parts := strings.Split(strings.ReplaceAll(cell, "`", ""), ", ")
	if len(parts) != len(names) {
		return
	}
	plain := regexp.MustCompile(`^[A-Za-z0-9:./_-]+$`)
	for i, part := range parts {
		f := fs.Lookup(names[i])
		if f == nil || !plain.MatchString(part) {
			continue
		}
		want := strings.TrimSuffix(part, "/s")
		switch want {
		case "none", "empty", "off":
			want = ""
		}
		got := f.DefValue
		if dw, err1 := time.ParseDuration(want); err1 == nil {
			if dg, err2 := time.ParseDuration(got); err2 == nil && dg == dw {
				continue
			}
		}
		if got != want {
			t.Errorf("docs/running.md says --%s defaults to %q; the flag's default is %q", names[i], part, got)
		}
	}
}
