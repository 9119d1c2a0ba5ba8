package ingest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseCIDRs parses a comma-separated list of CIDRs (or single addresses).
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			addr, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("ingest: bad address or CIDR %q: %w", part, err)
			}
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("ingest: bad address or CIDR %q: %w", part, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ClientIP returns the address a request came from: the peer, or — when
// the peer is a trusted proxy — the right-most X-Forwarded-For entry that
// is not itself a trusted proxy.
func ClientIP(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !isTrusted(peer.Unmap(), trusted) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // garbage: stop believing the header here
		}
		if !isTrusted(a.Unmap(), trusted) {
			return a.Unmap().String()
		}
	}
	return host
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ReadRanges reads CIDRs (or single addresses), one per line, from a
// ranges file; blank lines and # comments are skipped. Errors name the line.
func ReadRanges(r io.Reader) ([]netip.Prefix, error) {
	var out []netip.Prefix
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		ps, err := ParseCIDRs(line)
		if err != nil || len(ps) != 1 {
			return nil, fmt.Errorf("ingest: line %d: %q is not an address range", n, line)
		}
		out = append(out, ps...)
	}
	return out, sc.Err()
}

// DefaultIPv6Prefix is how many leading bits of an IPv6 address name one
// client for the per-address limits: one subscriber usually holds a whole
// /64, so limiting each address apart would give one person 2^64 budgets.
const DefaultIPv6Prefix = 64

// AddressKey is the key the per-address limits count ip under: an IPv4
// address itself, an IPv6 address's /v6bits network (v6bits 128: the
// address). Anything unparsable is its own key.
func AddressKey(ip string, v6bits int) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Is4() || a.Is4In6() || v6bits <= 0 || v6bits >= 128 {
		return ip
	}
	p, err := a.WithZone("").Prefix(v6bits)
	if err != nil {
		return ip
	}
	return p.String()
}
