// Command tally is Tally's operator, host and auditor tool: it drives a
// running node's API (polls, the cluster, backups), reproduces certified
// results offline from ledger exports, and generates load. `tally --help`
// lists the commands; every command and subcommand answers --help.
package main

import (
	"fmt"
	"io"
	"os"

	"tally/internal/buildinfo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: tally <command> [arguments]

Host and operator (a running node: --url URL, else $TALLY_URL, else
http://127.0.0.1:8080; the admin token from --token-file, $TALLY_TOKEN or
--token):
  poll create|list|show|close|extend|reveal
                     create and run polls
  poll result        a certified result; with export FILEs, check that they
                     reproduce its digest
  poll certify       certify now, leaving out a lost replica only explicitly
  cluster            members, regions, replica ids, NATS links and
                     staleness (--admin-url: the node's --admin-addr)
  quiz create|show|start|close|reveal|end
                     create and run quizzes
  quiz result        a quiz's certified leaderboard; with the exports of its
                     questions, reproduce it offline
  ledger backup      an online, consistent copy of a node's ledger
  ledger export      a poll's records from running nodes (--url, else
                     $TALLY_URL) or a stopped node's data dir (--data-dir)
  ledger restore     put a backup in a new data dir, as the same replica

Auditor (offline, from exports):
  ledger verify FILE…   check the hash chains of exported ledgers
  ledger merge FILE…    reconcile exports into the exact result and its digest

Voter:
  vote               one vote for a smoke test (--session earns a voter
                     token first); prints status, vote_id and stamp
  receipt verify     check a vote's receipt against its certified proof

Measurement:
  load               vote load generator (vegeta): throughput, acks, latency
  watch              print a poll's live tally, or measure the fan-out with
                     --swarm N viewers
  quiz swarm         N quiz participants on the quiz's stream answering a
                     question's burst: frames, acks, standings

Capacity:
  fleet plan         the fleet for a night (votes, burst, viewers, regions,
                     machines) from figures measured by bench/fleet-figures.sh

  version            print the version (also --version)

Every command that calls a node takes --url (--node is its old spelling)
and honours $TALLY_URL. "tally <command> --help" describes a command
(docs/cli.md has them all). Exit status: 0 on success, 1 when a check or a
request fails, 2 on a usage error.
`

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "ledger":
		return runLedger(args[1:], stdout, stderr)
	case "poll":
		return runPoll(args[1:], stdout, stderr)
	case "cluster":
		return runCluster(args[1:], stdout, stderr)
	case "quiz":
		return runQuiz(args[1:], stdout, stderr)
	case "watch":
		return runWatch(args[1:], stdout, stderr)
	case "vote":
		return runVote(args[1:], stdout, stderr)
	case "receipt":
		return runReceipt(args[1:], stdout, stderr)
	case "load":
		return runLoad(args[1:], stdout, stderr)
	case "fleet":
		return runFleet(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "tally", buildinfo.Read())
		return 0
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "tally: unknown command %q\n\n%s", args[0], usage)
	return 2
}
