package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"tally/api"
	"tally/client"
	"tally/internal/flagerr"
)

// newFlags makes a subcommand's flag set. synopsis is its usage line(s),
// printed above the flags by --help.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", synopsis)
		printDefaults(fs)
	}
	return fs
}

// parseFlags parses args by Go's conventions: -h or --help prints the
// usage to stdout and exits 0; a bad flag prints the error and the usage
// to stderr and exits 2. done reports that the command should return code.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(out.Bytes())
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v (%s --help lists the flags)\n", fs.Name(), flagerr.Describe(fs, err), fs.Name())
		return 2, true
	}
	if err := checkAliases(fs); err != nil {
		return usageError(fs, stderr, "%v", err), true
	}
	return 0, false
}

// usageError reports a wrong combination of flags or arguments (the flags
// themselves parsed): one line, the reason and where the usage is, exit
// status 2.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s (%s --help shows the usage)\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
	return 2
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// group dispatches "tally NAME SUB …" to the subcommand SUB, answering
// help (exit 0), a missing subcommand and an unknown one (exit 2).
func group(name, help string, subs map[string]func([]string, io.Writer, io.Writer) int, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "tally %s: a subcommand is needed\n\n%s", name, help)
		return 2
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, help)
		return 0
	}
	if sub, ok := subs[args[0]]; ok {
		return sub(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "tally %s: unknown subcommand %q\n\n%s", name, args[0], help)
	return 2
}

// defaultURL is the node a command calls when neither --url nor
// $TALLY_URL names one: `go run ./cmd/node` on this machine.
const defaultURL = "http://127.0.0.1:8080"

// urlUsage describes --url in every command that calls a node.
const urlUsage = "the node's address, http://host:port or https://host (default: $TALLY_URL, else " + defaultURL + ")"

// aliasPrefix starts the usage of a flag kept as another's old spelling:
// it is accepted, and --help leaves it out.
const aliasPrefix = "alias of --"

// urlVar registers --url and its old spelling --node (accepted, not shown
// by --help) on p, with the default "": resolveURL picks $TALLY_URL or
// defaultURL after parsing.
func urlVar(fs *flag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "url", "", usage)
	fs.StringVar(p, "node", "", aliasPrefix+"url")
}

// resolveURL is the node to call: the flag's value when given, else
// $TALLY_URL, else defaultURL; from names where it came from, for errors.
func resolveURL(flagged string) (url, from string) {
	if flagged != "" {
		return flagged, "--url"
	}
	if v := os.Getenv("TALLY_URL"); v != "" {
		return v, "$TALLY_URL"
	}
	return defaultURL, "--url (default)"
}

// printDefaults is fs.PrintDefaults without the aliases (old spellings).
func printDefaults(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, aliasPrefix) {
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(f.Name).DefValue = f.DefValue
	})
	shown.PrintDefaults()
}

// checkAliases refuses a flag given under both its spellings (a
// repeatable flag collects both).
func checkAliases(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.Visit(func(f *flag.Flag) {
		name, ok := strings.CutPrefix(f.Usage, aliasPrefix)
		if !ok || !set[name] || err != nil {
			return
		}
		if _, list := f.Value.(*stringList); !list {
			err = fmt.Errorf("give --%s or its old spelling --%s, not both", name, f.Name)
		}
	})
	return err
}

// nodeFlags are the flags of every command that calls a running node.
type nodeFlags struct {
	url, token, tokenFile string
}

// register adds --url (and its old spelling --node), --token and
// --token-file; the node defaults to $TALLY_URL and the token to
// $TALLY_TOKEN ($TALLY_ADMIN_TOKEN is also read, as the node reads it).
func (n *nodeFlags) register(fs *flag.FlagSet) {
	urlVar(fs, &n.url, urlUsage)
	n.registerToken(fs)
}

// registerToken adds --token and --token-file.
func (n *nodeFlags) registerToken(fs *flag.FlagSet) {
	fs.StringVar(&n.token, "token", "", "admin token (prefer $TALLY_TOKEN or --token-file: a flag shows in ps) [$TALLY_TOKEN]")
	fs.StringVar(&n.tokenFile, "token-file", "", "file holding the admin token (a node's is DATA_DIR/admin-token)")
}

// client returns a client for the node (--url, $TALLY_URL or the
// default), with the admin token of adminToken.
func (n *nodeFlags) client() (*client.Client, error) {
	url, from := resolveURL(n.url)
	return n.clientAt(url, from)
}

// adminToken is the admin token from --token, --token-file, $TALLY_TOKEN
// or $TALLY_ADMIN_TOKEN, in that order, and where it came from ("" and ""
// when none is given).
func (n *nodeFlags) adminToken() (token, from string, err error) {
	if n.token != "" {
		return n.token, "--token", nil
	}
	if n.tokenFile != "" {
		b, err := os.ReadFile(n.tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("--token-file: %w", err)
		}
		// A node's token file may list several during a rotation; the first is used.
		token, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
		token, _, _ = strings.Cut(token, ",")
		token = strings.TrimSpace(token)
		if token == "" {
			return "", "", fmt.Errorf("--token-file %s is empty", n.tokenFile)
		}
		return token, "--token-file " + n.tokenFile, nil
	}
	for _, env := range []string{"TALLY_TOKEN", "TALLY_ADMIN_TOKEN"} {
		if v := os.Getenv(env); v != "" {
			return v, "$" + env, nil
		}
	}
	return "", "", nil
}

// clientAt is client for the node at url, named by flag in an error.
func (n *nodeFlags) clientAt(url, flag string) (*client.Client, error) {
	token, _, err := n.adminToken()
	if err != nil {
		return nil, err
	}
	c, err := client.New(url, client.Options{Token: token, HTTPClient: &http.Client{Timeout: 10 * time.Minute}})
	if err != nil {
		return nil, fmt.Errorf("%s %q: want the node's address, http://host:port or https://host", flag, url)
	}
	return c, nil
}

// explain says a refusal of the admin token in the operator's terms: the
// node answers 401 both to no token and to a wrong one, so whether the
// CLI sent one tells "required" from "not accepted".
func (n *nodeFlags) explain(err error) error {
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || (e.Code != api.CodeUnauthorized && e.Code != "") {
		return err
	}
	_, from, _ := n.adminToken()
	if from == "" {
		return fmt.Errorf("admin token required: %s %s answered 401; give --token-file FILE (a node's is DATA_DIR/admin-token), $TALLY_TOKEN or --token", e.Method, e.URL)
	}
	return fmt.Errorf("admin token not accepted: %s %s answered 401 to the token from %s (not one the node holds; a node's is in DATA_DIR/admin-token)", e.Method, e.URL, from)
}
