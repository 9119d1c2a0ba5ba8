package ingest

import (
	"net/netip"
	"time"
)

// The voter-token budget of an address, across the cluster. Every node
// counts the tokens it issues per address group per minute in state, and
// gossip spreads the counts (state/budget.go), so three regions give an
// address one budget, not three. An IPv4 address is one group; an IPv6
// client counts under its /64 (--ipv6-prefix), its /56 (4 budgets) and its
// /48 (16 budgets) at once, so a /48 holds 16 budgets, not 65,536.
// Addresses in --shared-networks (a venue's Wi-Fi, a known carrier NAT)
// get SharedScale budgets.

// SharedScale is how many budgets an address in Sessions.Shared holds.
const SharedScale = 50

// tokenGroup is one group an address counts under, and how many budgets
// it holds.
type tokenGroup struct {
	key   uint64 // the group's hash (state.Hash)
	scale int
}

// tokenGroups returns the groups the address ip counts under.
func (p *Pipeline) tokenGroups(ip string) []tokenGroup {
	scale := 1
	if p.sessions.shared.contains(ip) {
		scale = SharedScale
	}
	base := []tokenGroup{{p.cfg.State.Hash("tokens " + p.addrKey(ip)), scale}}
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Is4() || a.Is4In6() {
		return base
	}
	bits := p.cfg.IPv6Prefix
	if bits == 0 {
		bits = DefaultIPv6Prefix
	}
	for _, wide := range []struct{ bits, budgets int }{{56, 4}, {48, 16}} {
		if bits > wide.bits {
			base = append(base, tokenGroup{p.cfg.State.Hash("tokens " + AddressKey(ip, wide.bits)), scale * wide.budgets})
		}
	}
	return base
}

// tokenBudget reports whether ip may have another token at now, and if
// not, when to ask again: the cluster's tokens for each of its groups over
// the sliding minute stay under TokensPerMinute, and over the hour under
// TokensPerHour (each times the group's budgets).
func (p *Pipeline) tokenBudget(ip string, now time.Time) (ok bool, retry time.Duration) {
	cfg := p.sessions.cfg
	nowMs := now.UnixMilli()
	frac := 1 - float64(nowMs%60_000)/60_000 // the previous minute's share of the sliding one
	for _, g := range p.tokenGroups(ip) {
		counts := p.cfg.State.TokensIssued(g.key, nowMs, 60)
		minute := float64(counts[0]) + float64(counts[1])*frac
		var hour uint64
		for _, n := range counts {
			hour += n
		}
		if minute >= float64(cfg.TokensPerMinute*g.scale) {
			return false, time.Duration(60_000-nowMs%60_000) * time.Millisecond
		}
		if hour >= uint64(cfg.TokensPerHour*g.scale) {
			return false, time.Duration(60_000-nowMs%60_000)*time.Millisecond + time.Minute
		}
	}
	return true, 0
}

// tokenIssued counts a token issued to ip at now in every group.
func (p *Pipeline) tokenIssued(ip string, now time.Time) {
	groups := p.tokenGroups(ip)
	keys := make([]uint64, len(groups))
	for i, g := range groups {
		keys[i] = g.key
	}
	p.cfg.State.IssueTokens(keys, now.UnixMilli())
}

// recentTokens is how many tokens the address's own group had across the
// cluster in the sliding minute (the puzzle's difficulty grows with it).
func (p *Pipeline) recentTokens(ip string, now time.Time) int {
	nowMs := now.UnixMilli()
	counts := p.cfg.State.TokensIssued(p.tokenGroups(ip)[0].key, nowMs, 2)
	return int(float64(counts[0]) + float64(counts[1])*(1-float64(nowMs%60_000)/60_000))
}
