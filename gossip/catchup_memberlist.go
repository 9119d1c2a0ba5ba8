package gossip

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/hashicorp/memberlist"
)

// Catch-up over memberlist, for when NATS is down: a request and its
// answer travel as memberlist user messages over TCP (SendReliable),
// encrypted by memberlist's keyring and sealed like all gossip.
const (
	msgBallotRequest = 'Q'
	msgBallotAnswer  = 'A'
	// maxAnswering bounds the requests answered at once; more are dropped
	// (the asker asks again a second later).
	maxAnswering = 4
)

// waiters are the memberlist catch-up requests awaiting their answer.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan []byte
}

// askMember sends req to the node of replica over memberlist and returns
// the sealed answer.
func (c *catchUp) askMember(ctx context.Context, replica string, req ballotRequest) ([]byte, error) {
	g := c.g
	node, ok := g.catchup.nodeOf(replica)
	if !ok {
		return nil, fmt.Errorf("no live member holds replica %s", replica)
	}
	var id [8]byte
	rand.Read(id[:])
	req.From, req.ID = g.cfg.NodeName, hex.EncodeToString(id[:])
	ch := make(chan []byte, 1)
	c.wait.mu.Lock()
	if c.wait.m == nil {
		c.wait.m = map[string]chan []byte{}
	}
	c.wait.m[req.ID] = ch
	c.wait.mu.Unlock()
	defer func() {
		c.wait.mu.Lock()
		delete(c.wait.m, req.ID)
		c.wait.mu.Unlock()
	}()
	body, _ := json.Marshal(req)
	if err := g.ml.SendReliable(node, append([]byte{msgBallotRequest}, g.keys.seal(body)...)); err != nil {
		return nil, err
	}
	select {
	case b := <-ch:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// nodeOf finds the live member that holds replica.
func (c *catchUp) nodeOf(replica string) (*memberlist.Node, bool) {
	g := c.g
	for _, p := range g.memberList() {
		if p.meta.Replica != replica {
			continue
		}
		host, port, err := net.SplitHostPort(p.gossip)
		if err != nil {
			return nil, false
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, false
		}
		return &memberlist.Node{Name: p.name, Addr: net.ParseIP(host), Port: uint16(n)}, true
	}
	return nil, false
}

// userMsg handles a memberlist user message (a copy: memberlist reuses
// its buffer). Answers are built off memberlist's receive path.
func (c *catchUp) userMsg(b []byte) {
	g := c.g
	if len(b) < 2 || g.closed.Load() || g.refuseKeyless(pathCatchUp, len(b)) {
		return
	}
	switch b[0] {
	case msgBallotRequest:
		select {
		case c.answering <- struct{}{}:
		default:
			g.m.dropped.WithLabelValues(pathCatchUp, "busy").Inc()
			return
		}
		// Checked and counted under userMu, which Close takes once it has
		// set closed: an answer is either refused or waited for, never
		// added to the WaitGroup while Close waits on it.
		g.userMu.Lock()
		if g.closed.Load() {
			g.userMu.Unlock()
			<-c.answering
			return
		}
		g.wg.Add(1)
		g.userMu.Unlock()
		go func() {
			defer func() { <-c.answering; g.wg.Done() }()
			req, answer, ok := g.catchup.answerFor(b[1:], g.cfg.Replica)
			if !ok {
				return
			}
			idb := []byte(req.ID)
			msg := append(append(append([]byte{msgBallotAnswer}, byte(len(idb))), idb...), answer...)
			for _, p := range g.memberList() {
				if p.name == req.From {
					if node, ok := g.catchup.nodeOf(p.meta.Replica); ok {
						if err := g.ml.SendReliable(node, msg); err == nil {
							g.m.bytes.WithLabelValues(pathCatchUp, "out").Add(float64(len(msg)))
						}
					}
					return
				}
			}
		}()
	case msgBallotAnswer:
		n := int(b[1])
		if len(b) < 2+n {
			return
		}
		c.wait.mu.Lock()
		ch, ok := c.wait.m[string(b[2:2+n])]
		c.wait.mu.Unlock()
		if ok {
			select {
			case ch <- b[2+n:]:
			default:
			}
		}
	}
}
