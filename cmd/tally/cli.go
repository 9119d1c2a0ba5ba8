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

	"tally/client"
	"tally/internal/flagerr"
)

// newFlags makes a subcommand's flag set. synopsis is its usage line(s),
// printed above the flags by --help.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
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

// nodeFlags are the flags of every command that calls a running node.
type nodeFlags struct {
	url, token, tokenFile string
}

// register adds --node, --token and --token-file, defaulting to
// $TALLY_URL and $TALLY_TOKEN ($TALLY_ADMIN_TOKEN is also read, as the
// node reads it).
func (n *nodeFlags) register(fs *flag.FlagSet) {
	def := cmpEnv("TALLY_URL", "http://127.0.0.1:8080")
	fs.StringVar(&n.url, "node", def, "a node of the cluster [$TALLY_URL]")
	fs.StringVar(&n.token, "token", "", "admin token (prefer $TALLY_TOKEN or --token-file: a flag shows in ps) [$TALLY_TOKEN]")
	fs.StringVar(&n.tokenFile, "token-file", "", "file holding the admin token (a node's is DATA_DIR/admin-token)")
}

// client returns a client for the node, with the token from --token,
// --token-file, $TALLY_TOKEN or $TALLY_ADMIN_TOKEN, in that order.
func (n *nodeFlags) client() (*client.Client, error) { return n.clientAt(n.url, "--node") }

// clientAt is client for the node at url, named by flag in an error.
func (n *nodeFlags) clientAt(url, flag string) (*client.Client, error) {
	token := n.token
	if token == "" && n.tokenFile != "" {
		b, err := os.ReadFile(n.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		// A node's token file may list several during a rotation; the first is used.
		token, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
		token, _, _ = strings.Cut(token, ",")
		token = strings.TrimSpace(token)
		if token == "" {
			return nil, fmt.Errorf("--token-file %s is empty", n.tokenFile)
		}
	}
	if token == "" {
		token = cmpEnv("TALLY_TOKEN", os.Getenv("TALLY_ADMIN_TOKEN"))
	}
	c, err := client.New(url, client.Options{Token: token, HTTPClient: &http.Client{Timeout: 10 * time.Minute}})
	if err != nil {
		return nil, fmt.Errorf("%s %q: want the node's address, http://host:port or https://host", flag, url)
	}
	return c, nil
}

// cmpEnv returns $name, or def when it is unset or empty.
func cmpEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
