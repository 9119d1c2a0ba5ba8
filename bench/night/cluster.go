package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// region is one node process of the cluster: a region's full node, or
// one of its edges.
type region struct {
	name     string
	url      string // public HTTP
	adminURL string // --admin-addr
	cmd      *exec.Cmd
	logPath  string
}

// cluster is three regions started from the node binary, sharing the
// secrets an operator would give them, in files.
type cluster struct {
	dir           string
	regions       []*region   // the full nodes, one a region
	edges         [][]*region // per region, its edges (--edges)
	adminToken    string
	sessionSecret []byte
}

// startCluster starts one full node per region on loopback, joined over
// encrypted memberlist, NATS gateways between regions, voter tokens
// required, and edges (--role edge, NATS leaves of their region's full
// node) a region. It returns once every node answers /readyz.
func startCluster(bin, dir string, names []string, maxViewers, edges int) (*cluster, error) {
	c := &cluster{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	secret := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	c.adminToken = hex.EncodeToString(secret(16))
	c.sessionSecret = []byte(hex.EncodeToString(secret(32)))
	files := map[string][]byte{
		"admin-token":    []byte(c.adminToken),
		"gossip-key":     []byte(base64.StdEncoding.EncodeToString(secret(32))),
		"session-secret": c.sessionSecret,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	var seeds []string
	for i := range names {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", 17946+i))
	}
	for i, name := range names {
		r := &region{name: name, url: fmt.Sprintf("http://127.0.0.1:%d", 18281+i), adminURL: fmt.Sprintf("http://127.0.0.1:%d", 18291+i),
			logPath: filepath.Join(dir, name+".log")}
		args := []string{
			"--region", name, "--node-name", name + "-1", "--data-dir", filepath.Join(dir, name),
			"--http-addr", strings.TrimPrefix(r.url, "http://"), "--admin-addr", strings.TrimPrefix(r.adminURL, "http://"),
			"--gossip-addr", seeds[i], "--join", strings.Join(seeds, ","), "--gossip-profile", "lan", "--push-pull-interval", "5s",
			"--gossip-key-file", filepath.Join(dir, "gossip-key"), "--admin-token-file", filepath.Join(dir, "admin-token"),
			"--session-secret-file", filepath.Join(dir, "session-secret"),
			"--nats-addr", fmt.Sprintf("127.0.0.1:%d", 18421+i), "--nats-cluster-addr", fmt.Sprintf("127.0.0.1:%d", 18621+i),
			"--nats-gateway-addr", fmt.Sprintf("127.0.0.1:%d", 18721+i), "--nats-leaf-addr", fmt.Sprintf("127.0.0.1:%d", 18821+i),
			// Voters behave like the page: tokens required, the trust score
			// on at its default floor, per-address limits at their defaults.
			"--require-session", "--trusted-proxies", "127.0.0.0/8",
			// A million puzzles would take the generator's share of the
			// two cores; tokens are minted (see doc.go).
			"--pow-bits", "0",
			"--max-viewers", strconv.Itoa(maxViewers), "--demo=false", "--drain", "0",
			// Profiles while the night runs: go tool pprof http://127.0.0.1:1831x/debug/pprof/profile
			"--debug-addr", fmt.Sprintf("127.0.0.1:%d", 18311+i),
		}
		if err := r.start(bin, args); err != nil {
			return c, err
		}
		c.regions = append(c.regions, r)
	}
	if err := waitReady(c.regions); err != nil {
		return c, err
	}
	// Edges: viewers' sockets and their votes, relayed to their region's
	// full node; they need the gossip key only. Ports: HTTP 19000+20i+j,
	// admin +100, gossip +200, NATS client +300.
	for i, name := range names {
		var rs []*region
		for j := range edges {
			base := 19000 + 20*i + j
			r := &region{name: fmt.Sprintf("%s-edge-%d", name, j), url: fmt.Sprintf("http://127.0.0.1:%d", base),
				adminURL: fmt.Sprintf("http://127.0.0.1:%d", base+100), logPath: filepath.Join(dir, fmt.Sprintf("%s-edge-%d.log", name, j))}
			args := []string{
				"--role", "edge", "--region", name, "--node-name", r.name, "--data-dir", filepath.Join(dir, r.name),
				"--http-addr", strings.TrimPrefix(r.url, "http://"), "--admin-addr", strings.TrimPrefix(r.adminURL, "http://"),
				"--gossip-addr", fmt.Sprintf("127.0.0.1:%d", base+200), "--join", strings.Join(seeds, ","), "--gossip-profile", "lan",
				"--push-pull-interval", "5s", "--gossip-key-file", filepath.Join(dir, "gossip-key"),
				"--nats-addr", fmt.Sprintf("127.0.0.1:%d", base+300),
				"--trusted-proxies", "127.0.0.0/8", "--max-viewers", strconv.Itoa(maxViewers), "--demo=false", "--drain", "0",
			}
			if err := r.start(bin, args); err != nil {
				return c, err
			}
			rs = append(rs, r)
		}
		c.edges = append(c.edges, rs)
	}
	for _, rs := range c.edges {
		if err := waitReady(rs); err != nil {
			return c, err
		}
	}
	return c, nil
}

// start runs the node binary with args, its output to the region's log.
func (r *region) start(bin string, args []string) error {
	log, err := os.Create(r.logPath)
	if err != nil {
		return err
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return r.cmd.Start()
}

// waitReady waits up to a minute for every node's /readyz.
func waitReady(rs []*region) error {
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range rs {
		for {
			res, err := http.Get(r.url + "/readyz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not ready within 60 s; its log: %s", r.name, tail(r.logPath))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// all is every process: full nodes, then edges.
func (c *cluster) all() []*region {
	out := slices.Clone(c.regions)
	for _, rs := range c.edges {
		out = append(out, rs...)
	}
	return out
}

// stop ends every node with SIGTERM and waits for it.
func (c *cluster) stop() {
	for _, r := range c.all() {
		if r.cmd != nil && r.cmd.Process != nil {
			r.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, r := range c.all() {
		if r.cmd != nil && r.cmd.Process != nil {
			r.cmd.Wait()
		}
	}
}

func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > 10 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// usage is a process's CPU seconds and peak RSS, from /proc.
type usage struct {
	cpu    float64 // seconds, user + system
	peakMB float64
}

func procUsage(pid int) usage {
	var u usage
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command name (which may hold spaces).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) > 12 {
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			u.cpu = (ut + st) / 100 // clock ticks (USER_HZ = 100)
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				u.peakMB = kb / 1024
			}
		}
	}
	return u
}
