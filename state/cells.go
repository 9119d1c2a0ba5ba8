package state

import (
	"math/rand/v2"
	"sync/atomic"
)

// cell is one stripe of one option's counter, padded to a cache line so
// concurrent writers to neighbouring stripes do not share one.
type cell struct {
	p, n atomic.Uint64
	_    [48]byte
}

// cells holds this replica's (P, N) counts for each option of one poll,
// and its ledger record count, striped.
type cells struct {
	options map[string]int // option id → column
	stripes int
	grid    []cell // stripes rows × len(options) columns
	records []cell // one per stripe; only p is used
}

func newCells(options []string, stripes int) *cells {
	c := &cells{options: make(map[string]int, len(options)), stripes: stripes}
	for i, o := range options {
		c.options[o] = i
	}
	c.grid = make([]cell, stripes*len(options))
	c.records = make([]cell, stripes)
	return c
}

// add changes option's count by delta; it reports false for an option the
// poll does not have.
func (c *cells) add(option string, delta int64) bool {
	col, ok := c.options[option]
	if !ok {
		return false
	}
	cl := &c.grid[rand.IntN(c.stripes)*len(c.options)+col]
	if delta >= 0 {
		cl.p.Add(uint64(delta))
	} else {
		cl.n.Add(uint64(-delta))
	}
	return true
}

func (c *cells) addRecords(n uint64) { c.records[rand.IntN(c.stripes)].p.Add(n) }

// sum returns option's (P, N) summed over the stripes.
func (c *cells) sum(col int) (p, n uint64) {
	for s := range c.stripes {
		cl := &c.grid[s*len(c.options)+col]
		p += cl.p.Load()
		n += cl.n.Load()
	}
	return p, n
}

func (c *cells) recordCount() uint64 {
	var n uint64
	for i := range c.records {
		n += c.records[i].p.Load()
	}
	return n
}
