package ingest

import (
	"math"
	"math/bits"
)

// distinct counts the distinct voters seen from one address: exactly up
// to exactCap, then with a HyperLogLog sketch of 1,024 registers (about 3%
// error), so the signal keeps growing — and keeps its weight — at any
// scale, in bounded memory (issue 25: a cap at 4,096 turned it off).
type distinct struct {
	exact map[uint64]struct{}
	hll   *[hllRegisters]uint8 // nil until exact is full
}

const (
	exactCap     = 4096
	hllBits      = 10
	hllRegisters = 1 << hllBits
)

func newDistinct() distinct { return distinct{exact: map[uint64]struct{}{}} }

// add records a voter by its 64-bit hash.
func (d *distinct) add(h uint64) {
	if d.hll == nil {
		if _, ok := d.exact[h]; ok || len(d.exact) < exactCap {
			d.exact[h] = struct{}{}
			return
		}
		d.hll = new([hllRegisters]uint8)
		for x := range d.exact {
			d.sketch(x)
		}
		d.exact = nil
	}
	d.sketch(h)
}

func (d *distinct) sketch(h uint64) {
	i := h >> (64 - hllBits)
	rank := uint8(bits.LeadingZeros64(h<<hllBits|1<<(hllBits-1)) + 1)
	if rank > d.hll[i] {
		d.hll[i] = rank
	}
}

// count returns the number of distinct voters (estimated past exactCap,
// never below it).
func (d *distinct) count() int {
	if d.hll == nil {
		return len(d.exact)
	}
	sum, zeros := 0.0, 0
	for _, r := range d.hll {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	m := float64(hllRegisters)
	est := 0.7213 / (1 + 1.079/m) * m * m / sum
	if est <= 2.5*m && zeros > 0 {
		est = m * math.Log(m/float64(zeros))
	}
	return max(int(est), exactCap)
}
