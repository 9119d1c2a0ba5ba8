package node

import (
	"net/http"
	"net/url"
	"sync"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	"golang.org/x/time/rate"

	"tally/api"
)

// A QR code costs ~13 ms of CPU to draw. Images are kept per (address,
// size), and drawing new ones is limited node-wide, so no client can turn
// the endpoint into a CPU sink: a refused draw is 429 with Retry-After.
const (
	qrCacheEntries = 256 // distinct (address, size) images kept
	qrDrawsPerSec  = 10  // new images drawn a second, node-wide: ≤ 13% of a core
	qrDrawBurst    = 20
)

// qrCache holds drawn QR images. When full it starts again empty: the
// images in use are drawn again within the draw budget.
type qrCache struct {
	mu     sync.Mutex
	images map[qrKey][]byte
	draws  *rate.Limiter
}

type qrKey struct {
	url  string
	size int
}

func newQRCache() *qrCache {
	return &qrCache{images: make(map[qrKey][]byte), draws: rate.NewLimiter(qrDrawsPerSec, qrDrawBurst)}
}

// get returns the PNG of url at size pixels, drawing it if it is not kept
// and the draw budget allows.
func (c *qrCache) get(url string, size int, now time.Time) ([]byte, error) {
	k := qrKey{url, size}
	c.mu.Lock()
	png, ok := c.images[k]
	c.mu.Unlock()
	if ok {
		return png, nil
	}
	if r := c.draws.ReserveN(now, 1); !r.OK() || r.DelayFrom(now) > 0 {
		if r.OK() {
			r.CancelAt(now)
		}
		e := api.Errorf(http.StatusTooManyRequests, api.CodeRateLimited, "too many new QR codes drawn; try again shortly")
		e.RetryAfter = time.Second
		return nil, e
	}
	png, err := qrcode.Encode(url, qrcode.Medium, size)
	if err != nil {
		return nil, api.Errorf(http.StatusInternalServerError, api.CodeInternal, "cannot draw the QR code: %v", err)
	}
	c.mu.Lock()
	if len(c.images) >= qrCacheEntries {
		clear(c.images)
	}
	c.images[k] = png
	c.mu.Unlock()
	return png, nil
}

// handleQR serves GET /v1/polls/{poll}/qr.png: the voting address as a QR
// code, ?size= pixels (128-1024, default 512). A quiz question not yet
// started is 404, as on every other public endpoint.
func (n *Node) handleQR(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("poll")
	if def, ok := n.state.Poll(id); !ok || def.Withheld(n.cfg.Now().UnixMilli()) {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id))
		return
	}
	size := 512
	if s := r.URL.Query().Get("size"); s != "" {
		var ok bool
		if size, ok = atoiIn(s, 128, 1024); !ok {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "size must be 128-1024 pixels"))
			return
		}
	}
	u := n.voteURL(r, id)
	png, err := n.qr.get(u, size, time.Now())
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Tally-Vote-URL", u)
	w.Write(png)
}

// handleQuizQR serves GET /v1/quizzes/{quiz}/qr.png: the quiz's join
// address (its participant page) as a QR code, for the studio screen's
// lobby; ?size= as for a poll's.
func (n *Node) handleQuizQR(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("quiz")
	if _, ok := api.QuizOf(n.state, id, false, n.cfg.Now().UnixMilli()); !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeQuizNotFound, "no quiz %q", id))
		return
	}
	size := 512
	if s := r.URL.Query().Get("size"); s != "" {
		var ok bool
		if size, ok = atoiIn(s, 128, 1024); !ok {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "size must be 128-1024 pixels"))
			return
		}
	}
	u := n.publicBase(r) + "/#/quiz/" + url.PathEscape(id)
	png, err := n.qr.get(u, size, time.Now())
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Tally-Vote-URL", u)
	w.Write(png)
}
