// Command tally is Tally's operator and auditor tool.
//
//	tally ledger verify FILE...            check the hash chains of exported ledgers
//	tally ledger merge [--json] FILE...    reconcile exports into the certified result
//	tally ledger export --data-dir DIR --poll ID [-o FILE]
//	                                       export one poll from a stopped node's data dir
//	tally ledger export --node URL… --poll ID [-o DIR]
//	                                       fetch every replica's records from running nodes
//	tally poll result --node URL --poll ID [FILE…]
//	                                       a certified result, and whether FILEs reproduce it
//	tally poll certify --node URL --poll ID [--exclude R --reason TEXT]
//	                                       certify now (without a lost replica, explicitly)
//	tally load [flags]                     generate vote load and report throughput and latency
//	tally watch [--swarm N]                watch a poll live, or measure the fan-out with N viewers
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: tally <command> [arguments]

commands:
  ledger verify FILE...          check the hash chains of exported ledgers (NDJSON)
  ledger merge [--json] FILE...  reconcile exports into the exact result and its digest
  ledger merge --closes-at MS …  apply the poll's final close (from its certified result)
  ledger export --data-dir DIR --poll ID [-o FILE]
                                 export one poll from a stopped node's data dir
  ledger export --node URL [--node URL…] --poll ID [--token T] [-o DIR]
                                 fetch each running node's records of a poll into DIR
  poll result --node URL --poll ID [--json] [FILE…]
                                 show the certified result; with FILEs, check that
                                 they reproduce its digest
  poll certify --node URL --poll ID [--token T] [--exclude REPLICA --reason TEXT]
                                 certify now; leaving out a lost replica only explicitly
  load [--rate R | --rate 0] [--batch N] …
                                 vote load generator (vegeta): throughput, acks, latency percentiles
  watch [--url URL] [--poll ID]  print a poll's live tally as it changes
  watch --swarm N [--server-pid PID] …
                                 open N viewers and report delivery lag, missed
                                 frames, server memory and CPU (see --help)

Exit status: 0 on success, 1 when verification or reconciliation fails, 2 on
a usage error.
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
	case "watch":
		return runWatch(args[1:], stdout, stderr)
	case "load":
		return runLoad(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "tally: unknown command %q\n\n%s", args[0], usage)
	return 2
}
