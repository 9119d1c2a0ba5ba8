package node

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tally/api"
	"tally/gossip"
	"tally/web"
)

// routes is the public listener's handler: the API, the live streams,
// the page and, without --admin-addr, the operators' endpoints.
// It is long because it is the route table, one line a route.
func (n *Node) routes() http.Handler {
	mux := routeMux{http.NewServeMux(), n.m.http}
	admin := func(h http.HandlerFunc) http.Handler { return api.RequireBearer(n.adminTokens, h) }
	ready := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := n.readyErr(); err != nil {
				api.WriteError(w, r, err)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	in, host := n.ingest, n.admin
	create, closePoll, votes, certifyNow := host.HandleCreatePoll, host.HandleClosePoll, in.HandleVotes, n.certify.HandleCertify
	sessions, proof := in.HandleSession, n.certify.HandleProof
	extend, reveal := host.HandleExtend, host.HandleReveal
	createQuiz, quizStart, quizClose, quizReveal, quizEnd := host.HandleCreateQuiz, host.HandleQuizStart, host.HandleQuizClose, host.HandleQuizReveal, host.HandleQuizEnd
	// write guards the host's writes: the admin token at a full node; at
	// an edge a 421 whatever the token (an edge holds none of the
	// cluster's: the writes are the full nodes').
	// The ledger and the backup are a full node's too: an edge keeps no
	// votes, and its own token is not the cluster's.
	// Browser writes come from this site or an embedder of --origins only
	// (api/browser.go): a voter's, declared JSON too; the host's, behind the
	// admin token, from no other site's page.
	origins := n.pages.origins()
	voterWrite := func(h http.Handler) http.Handler { return api.BrowserWrite(origins, h) }
	write := func(h http.HandlerFunc) http.Handler { return origins.SameSiteOnly(admin(h)) }
	ledger, backup := n.adminOrPeer(host.HandleLedger), admin(n.backup.ServeHTTP)
	if n.cfg.Role == gossip.RoleEdge {
		votes, sessions, proof = n.edge.HandleVotes, n.edge.HandleSession, n.edge.HandleProof // relayed to a full node (package relay)
		write = func(http.HandlerFunc) http.Handler { return http.HandlerFunc(refuseOnEdge) }
		ledger, backup = http.HandlerFunc(refuseOnEdge), http.HandlerFunc(refuseOnEdge)
	}
	// Public reads show a hidden poll's counts to the admin token only.
	public := func(h http.HandlerFunc) http.Handler {
		return ready(n.pages.cors(api.OptionalBearer(n.adminTokens, h)))
	}
	mux.Handle("POST /v1/polls", ready(write(create)))
	mux.Handle("GET /v1/polls", public(host.HandleListPolls))
	mux.Handle("GET /v1/polls/{poll}", public(host.HandleGetPoll))
	mux.Handle("POST /v1/polls/{poll}/close", ready(write(closePoll)))
	mux.Handle("POST /v1/polls/{poll}/extend", ready(write(extend)))
	mux.Handle("POST /v1/polls/{poll}/reveal", ready(write(reveal)))
	mux.Handle("POST /v1/polls/{poll}/votes", voterWrite(n.votesRoute(votes, ready)))
	mux.Handle("OPTIONS /v1/polls/{poll}/votes", http.HandlerFunc(origins.Preflight))
	mux.Handle("GET /v1/polls/{poll}/ledger", ready(ledger))
	mux.Handle("POST /v1/session", voterWrite(ready(http.HandlerFunc(sessions))))
	mux.Handle("OPTIONS /v1/session", http.HandlerFunc(origins.Preflight))
	mux.Handle("POST /v1/quizzes", ready(write(createQuiz)))
	mux.Handle("GET /v1/quizzes/{quiz}", public(host.HandleGetQuiz))
	mux.Handle("POST /v1/quizzes/{quiz}/start", ready(write(quizStart)))
	mux.Handle("POST /v1/quizzes/{quiz}/close", ready(write(quizClose)))
	mux.Handle("POST /v1/quizzes/{quiz}/reveal", ready(write(quizReveal)))
	mux.Handle("POST /v1/quizzes/{quiz}/end", ready(write(quizEnd)))
	mux.Handle("GET /v1/quizzes/{quiz}/leaderboard", public(n.certify.HandleLeaderboard))
	mux.Handle("GET /v1/quizzes/{quiz}/live", ready(http.HandlerFunc(n.fanout.HandleQuizLive)))
	mux.Handle("GET /v1/backup", ready(backup))
	mux.Handle("GET /v1/polls/{poll}/result", public(n.certify.HandleResult))
	mux.Handle("GET /v1/polls/{poll}/proofs/{leaf}", public(proof))
	mux.Handle("POST /v1/polls/{poll}/certify", ready(write(certifyNow)))
	mux.Handle("GET /v1/polls/{poll}/live", ready(http.HandlerFunc(n.fanout.HandleLive)))
	mux.Handle("GET /v1/polls/{poll}/events", ready(n.pages.cors(http.HandlerFunc(n.fanout.HandleEvents))))
	n.pages.routes(mux, ready)
	mux.Handle("GET /v1/cluster/keys", n.pages.cors(http.HandlerFunc(n.keys.handle)))
	if n.adminSrv == nil {
		mux.Handle("GET /v1/cluster", http.HandlerFunc(n.handleCluster))
		mux.Handle("GET /metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{Registry: n.reg}))
	} else {
		// The public port keeps what viewers need (the region freshness);
		// members, addresses and metrics are on --admin-addr.
		mux.Handle("GET /v1/cluster", n.pages.cors(http.HandlerFunc(n.handlePublicCluster)))
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeInvalidRequest, "metrics are served on the admin address"))
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		api.WriteJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", n.handleReady)
	mux.HandleFunc("/", pageFiles(n.pages.csp("'self'"))) // only /embed/ may be framed elsewhere
	mux.HandleFunc("/v1/", noEndpoint(mux))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.draining.Load() {
			// Answered in full, then the connection closes: the client's
			// next request opens a new one, which the load balancer sends
			// to a node that is not stopping.
			w.Header().Set("Connection", "close")
		}
		mux.ServeHTTP(w, r)
	})
}

// pageFiles serves the embedded page's files (GET and HEAD only) with
// the page's Content-Security-Policy.
func pageFiles(csp string) http.HandlerFunc {
	page := http.FileServerFS(web.FS())
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, r, api.Errorf(http.StatusMethodNotAllowed, api.CodeInvalidRequest, "method %s not allowed", r.Method))
			return
		}
		w.Header().Set("Content-Security-Policy", csp)
		page.ServeHTTP(w, r)
	}
}

// noEndpoint answers under /v1/ what no route takes: a path that exists
// with other methods is 405 with Allow, not 404 (the catch-all would
// otherwise shadow ServeMux's own 405).
func noEndpoint(mux routeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/v1/" && pattern != "" {
				allow = append(allow, m)
				if m == http.MethodGet {
					allow = append(allow, http.MethodHead) // net/http serves HEAD with GET's handler
				}
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			api.WriteError(w, r, api.Errorf(http.StatusMethodNotAllowed, api.CodeInvalidRequest, "%s %s: this endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	}
}

// adminRoutes is the --admin-addr listener: metrics, the full cluster
// view and Go's profiles, for operators on a private address.
func (n *Node) adminRoutes() http.Handler {
	mux := routeMux{debugMux(), n.m.http}
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{Registry: n.reg}))
	mux.Handle("GET /v1/cluster", http.HandlerFunc(n.handleCluster))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		api.WriteJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", n.handleReady)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeNotFound, "no such endpoint on the admin address: %s %s (it serves /metrics, /v1/cluster, /healthz, /readyz and /debug/pprof/)", r.Method, r.URL.Path))
	})
	return mux
}

// handleReady serves GET /readyz: 200 {"status":"ready"} once the node
// serves votes (replayed, caught up, not draining), else 503 with why.
func (n *Node) handleReady(w http.ResponseWriter, r *http.Request) {
	if n.draining.Load() {
		api.WriteError(w, r, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "draining: the node is stopping"))
		return
	}
	if !n.ready.Load() {
		api.WriteError(w, r, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%s", startingWhy(n)))
		return
	}
	if n.catchingUp() {
		api.WriteError(w, r, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "catching up with the other regions' votes"))
		return
	}
	if why := n.membersNotReady(); why != "" {
		api.WriteError(w, r, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%s", why))
		return
	}
	if why := n.edgeNotReady(); why != "" {
		api.WriteError(w, r, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%s", why))
		return
	}
	api.WriteJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}

// membersNotReady says why the node is not in the cluster it was told
// of, or "": its --join seeds never answered (down, or holding another
// --gossip-key: a split that would otherwise report ready on both
// sides), or it sees fewer members than --expect-members.
func (n *Node) membersNotReady() string {
	if !n.gossip.Joined() {
		if gossip.ProtocolRefused(n.gossip) {
			return fmt.Sprintf("not in the cluster: the members at --join (%s) speak a cluster protocol outside this release's (%d, beside %d to %d; the log names them): upgrade or roll back one release at a time",
				strings.Join(n.cfg.Join, ","), gossip.Protocol, gossip.Protocol-gossip.ProtocolWindow, gossip.Protocol+gossip.ProtocolWindow)
		}
		return fmt.Sprintf("not in the cluster: no --join seed (%s) has answered; check that they run and share this node's --gossip-key", strings.Join(n.cfg.Join, ","))
	}
	if seen, short := n.gossip.MembersShort(); short {
		why := fmt.Sprintf("%d of the %d members of --expect-members seen: a split or a lost node", seen, n.cfg.ExpectMembers)
		if n.gossip.KeyMismatch() {
			why += " (a node sends gossip this node's --gossip-key cannot read: the keys differ)"
		}
		return why
	}
	return ""
}

// edgeNotReady says why an edge cannot take votes now, or "" when it can:
// it must know a full node and reach the cluster's NATS (as a leaf of a
// full node, or as a client of an external server).
func (n *Node) edgeNotReady() string {
	if n.edge == nil {
		return ""
	}
	if region, others := n.fullNodes(); len(region)+len(others) == 0 {
		return "an edge with no full node in the cluster: votes would get 503 (check --join and the gossip key)"
	}
	if !n.gossip.Mesh().Connected() || n.cfg.NATSURL == "" && n.gossip.Mesh().LeafNodes() == 0 {
		return "an edge not connected to a full node's NATS: votes would get 503"
	}
	return ""
}

// debugMux serves Go's profiles, for --debug-addr.
func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
