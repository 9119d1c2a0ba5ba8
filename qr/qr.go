package qr

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	"golang.org/x/time/rate"

	"tally/api"
)

// A QR code costs ~13 ms of CPU to draw. Images are kept per (address,
// size), and drawing new ones is limited node-wide.
const (
	qrCacheEntries = 256 // distinct (address, size) images kept
	qrDrawsPerSec  = 10  // new images drawn a second, node-wide: ≤ 13% of a core
	qrDrawBurst    = 20
)

// Codes holds drawn QR images. When full it starts again empty: the
// images in use are drawn again within the draw budget.
type Codes struct {
	mu     sync.Mutex
	images map[qrKey][]byte
	draws  *rate.Limiter
}

type qrKey struct {
	url  string
	size int
}

// New returns an empty cache with a full draw budget.
func New() *Codes {
	return &Codes{images: make(map[qrKey][]byte), draws: rate.NewLimiter(qrDrawsPerSec, qrDrawBurst)}
}

// get returns the PNG of url at size pixels, drawing it if it is not kept
// and the draw budget allows.
func (c *Codes) get(url string, size int, now time.Time) ([]byte, error) {
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

// Serve writes the PNG of address at the size r asks for (?size=, 128 to
// 1024 pixels, default 512), its address in X-Tally-Vote-URL.
func (c *Codes) Serve(w http.ResponseWriter, r *http.Request, address string, now time.Time) {
	size := 512
	if s := r.URL.Query().Get("size"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 128 || v > 1024 {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "size must be 128-1024 pixels"))
			return
		}
		size = v
	}
	png, err := c.get(address, size, now)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Tally-Vote-URL", address)
	w.Write(png)
}
