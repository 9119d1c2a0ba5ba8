package node

import (
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpMetrics count every request by route (the ServeMux pattern, like
// "POST /v1/polls/{poll}/votes") and status code, and time the ones that
// are not streams.
type httpMetrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec

	mu     sync.Mutex
	routes []string // every route instrumented, for the OpenAPI test
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_http_requests_total",
			Help: "HTTP requests answered, by route (the ServeMux pattern) and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tally_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route; live streams (WebSocket, SSE) are not timed.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// routeMux is a ServeMux whose every route is instrumented.
type routeMux struct {
	*http.ServeMux
	m *httpMetrics
}

func (mux routeMux) Handle(pattern string, h http.Handler) {
	mux.ServeMux.Handle(pattern, mux.m.instrument(pattern, h))
}

func (mux routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	mux.Handle(pattern, http.HandlerFunc(h))
}

// instrument wraps h; promhttp's wrappers keep the writer's Flusher and
// Hijacker, which SSE and WebSocket need.
func (m *httpMetrics) instrument(route string, h http.Handler) http.Handler {
	m.mu.Lock()
	m.routes = append(m.routes, route)
	m.mu.Unlock()
	labels := prometheus.Labels{"route": route}
	h = promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), h)
	if strings.HasSuffix(route, "/live") || strings.HasSuffix(route, "/events") {
		return h
	}
	return promhttp.InstrumentHandlerDuration(m.seconds.MustCurryWith(labels), h)
}
