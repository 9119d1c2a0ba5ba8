package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"tally/api"
	"tally/gossip"
	"tally/relay"
)

func main() {
	url := flag.String("nats", "nats://127.0.0.1:4222", "the full node's NATS client URL")
	keyFile := flag.String("key-file", "", "the cluster's gossip key (base64), as the node has it")
	cluster := flag.String("cluster", "tally", "the cluster name")
	pollID := flag.String("poll", "p", "the poll to vote in")
	replica := flag.String("replica", "", "send to this full node's own relay subject (its replica id), not the full nodes' queue group")
	batch := flag.Int("batch", 256, "votes per relay message")
	inflight := flag.Int("inflight", 16, "relay messages in flight")
	duration := flag.Duration("duration", 10*time.Second, "how long to send")
	flag.Parse()
	raw, err := os.ReadFile(*keyFile)
	if err != nil {
		fail("--key-file: %v", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		fail("--key-file: not base64: %v", err)
	}
	user, pass := gossip.NATSCredential(key)
	nc, err := nats.Connect(*url, nats.UserInfo(user, pass))
	if err != nil {
		fail("--nats %s: %v", *url, err)
	}
	defer nc.Close()
	seal, open := gossip.RelaySealer([][]byte{key})
	run := rand.Uint64()
	subject := relay.Subject(*cluster)
	if *replica != "" {
		subject = relay.NodeSubject(*cluster, *replica)
	}
	var next, acked, refused, lost atomic.Int64
	var codesMu sync.Mutex
	codes := map[string]int64{} // the refusals' codes
	options := []string{"red", "green", "blue", "gold"}
	start := time.Now()
	var wg sync.WaitGroup
	for range *inflight {
		wg.Go(func() {
			reqs := make([]relay.Request, *batch)
			for time.Since(start) < *duration {
				for i := range reqs {
					n := next.Add(1)
					reqs[i] = relay.Request{Kind: relay.KindVote, Poll: *pollID,
						Votes:  []api.Vote{{Option: options[n%4], Voter: fmt.Sprintf("rl-%d", n), Idem: fmt.Sprintf("rl-%x-%d", run, n)}}, // decoded, as an edge relays it
						Sender: api.HTTPSender(fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255), "relayload", "", 0)}
				}
				reply, err := nc.Request(subject, seal(relay.AppendBatch(nil, reqs)), 5*time.Second)
				if err != nil {
					lost.Add(int64(len(reqs)))
					continue
				}
				body, err := open(reply.Data)
				if err != nil {
					fail("an answer that does not open: %v", err)
				}
				answers, err := relay.DecodeAnswers(body, reqs)
				if err != nil {
					fail("%v", err)
				}
				for _, a := range answers {
					if v := a.Vote; v != nil && len(v.Results) == 1 && v.Results[0].Status == api.StatusAccepted {
						acked.Add(1)
					} else {
						refused.Add(1)
						code := "other"
						if a.Err != nil {
							code = a.Err.Code
						}
						codesMu.Lock()
						codes[code]++
						codesMu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]any{"seconds": secs, "accepted": acked.Load(), "refused": refused.Load(), "refused_codes": codes, "lost": lost.Load(),
		"votes_per_sec": float64(acked.Load()) / secs, "batch": *batch, "inflight": *inflight})
	fmt.Println(string(out))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "relayload: "+format+"\n", args...)
	os.Exit(2)
}
