package node

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats-server/v2/server"

	"tally/gossip/gossiptest"
)

// BenchmarkVoteToViewerAcrossRegions measures, for votes acked at region
// A, how long until a viewer connected to region C sees them, with 50 ms
// added each way between regions (100 ms RTT). Each region has its own
// NATS server; the three form a supercluster whose gateway links run
// through delaying proxies (every byte into a region's gateway waits
// 50 ms). Memberlist push/pull is set to an hour, so this is the NATS fast
// path plus the fan-out tick (250 ms). It prints p50/p99; nothing is
// asserted about time. Run with ./bench/gossip.sh.
func BenchmarkVoteToViewerAcrossRegions(b *testing.B) {
	const votes = 200
	regions := []string{"eu-west", "us-east", "ap-south"}
	urls := supercluster(b, regions, 50*time.Millisecond)
	var nodes []*testNode
	for i, region := range regions {
		nodes = append(nodes, startNode(b, b.TempDir(), func(c *Config) {
			c.Region, c.NATSURL, c.PushPull = region, urls[region], time.Hour
			c.Limits.IPRate, c.Limits.VoterRate = 0, 0
			if i > 0 {
				c.Join = []string{nodes[0].GossipAddr()}
			}
		}))
	}
	a, c := nodes[0], nodes[2]
	a.createPoll(b, "p")
	havePoll(b, nodes, "p")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(c.url, "http")+"/v1/polls/p/live", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	seen := make(chan int64, 1024)
	go func() { // the viewer: reports every total it is shown
		defer close(seen)
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m struct {
				Total int64 `json:"total"`
			}
			if json.Unmarshal(data, &m) == nil {
				seen <- m.Total
			}
		}
	}()
	b.ResetTimer()
	for range b.N {
		var lat []time.Duration
		var shown int64
		for <-seen; len(seen) > 0; <-seen {
		}
		base := int64(0)
		if r := c.call(b, "GET", "/v1/polls/p", ""); r.status == 200 {
			base = int64(r.body["total"].(float64))
		}
		for i := range votes {
			time.Sleep(time.Duration(rand.IntN(250)) * time.Millisecond) // desynchronise from the tick
			a.vote(b, "p", []string{"a", "b", "c"}[i%3], fmt.Sprintf("viewer-bench-%d-%d", base, i))
			acked := time.Now()
			for shown < base+int64(i)+1 {
				total, ok := <-seen
				if !ok {
					b.Fatal("viewer stream ended")
				}
				shown = max(shown, total)
			}
			lat = append(lat, time.Since(acked))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	}
}

// supercluster starts one NATS server per region, joined by gateways that
// pass through delaying proxies, and returns each region's client URL.
func supercluster(tb testing.TB, regions []string, delay time.Duration) map[string]string {
	tb.Helper()
	ports := map[string]int{}
	proxies := map[string]*gossiptest.Proxy{}
	for _, r := range regions {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ports[r] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		p, err := gossiptest.NewProxy(fmt.Sprintf("127.0.0.1:%d", ports[r]), delay)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { p.Close() })
		proxies[r] = p
	}
	urls := map[string]string{}
	var servers []*server.Server
	for _, r := range regions {
		opts := &server.Options{ServerName: "nats-" + r, Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
			Gateway: server.GatewayOpts{Name: r, Host: "127.0.0.1", Port: ports[r], Advertise: proxies[r].Addr()}}
		for _, o := range regions {
			if o != r {
				u, _ := url.Parse("nats://" + proxies[o].Addr())
				opts.Gateway.Gateways = append(opts.Gateway.Gateways, &server.RemoteGatewayOpts{Name: o, URLs: []*url.URL{u}})
			}
		}
		s, err := server.NewServer(opts)
		if err != nil {
			tb.Fatal(err)
		}
		s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			tb.Fatal("nats not ready")
		}
		tb.Cleanup(s.Shutdown)
		servers = append(servers, s)
		urls[r] = s.ClientURL()
	}
	waitFor(tb, func() bool {
		for _, s := range servers {
			gz, err := s.Gatewayz(nil)
			if err != nil || len(gz.OutboundGateways) != len(regions)-1 || len(gz.InboundGateways) != len(regions)-1 {
				return false
			}
		}
		return true
	})
	return urls
}
