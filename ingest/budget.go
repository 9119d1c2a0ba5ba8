package ingest

import (
	"net/netip"
	"strconv"
	"time"
)

// The voter-token budget of an address, across the cluster. Every node
// counts the tokens it issues per address group per minute in state, and
// gossip spreads the counts (state/budget.go), so three regions give an
// address one budget, not three. An IPv4 address is one group; an IPv6
// client counts under its /64 (--ipv6-prefix) and its /48 at once, so a
// /48 — the most one party is commonly given — holds one budget, not
// 65,536.
//
// The budget has two parts:
//   - a hard limit: at most TokensPerMinute tokens a group per sliding
//     minute, past which POST /v1/session answers 429 (the puzzle's cost
//     grows with the same count);
//   - a vouching limit: each token records its slot, its place among the
//     tokens its group was issued within one token life (the TTL: every
//     token issued earlier has expired). The votes of a token past
//     Sessions.Vouched (a quiz question's answers: past QuizVouched) are
//     ledgered and shadowed, not refused: nobody behind a crowded address
//     is locked out, and a group never holds more than Vouched tokens
//     that count, however long it farms;
//   - a pace (Sessions.VouchPace, by the process clock): a node vouches
//     at most that many tokens a group a second (later asks within the
//     second get 429 and Retry-After: 1; the page retries), so regions an
//     attacker asks at once cannot all hand out the same slots before they
//     hear of each other: the overshoot is what the other regions vouch
//     within one gossip delay (under a second), not a budget each.
//
// Addresses in --shared-networks (a venue's Wi-Fi, a known carrier NAT)
// are vouched whatever their count and hold SharedScale hard limits.

// SharedScale is how many hard limits an address in Sessions.Shared holds.
const SharedScale = 50

// tokenGroups returns the hashes of the groups the address ip counts
// under (state.Hash).
func (p *Pipeline) tokenGroups(ip string) []uint64 {
	groups := []uint64{p.cfg.State.Hash("tokens " + AddressKey(ip, p.ipv6Prefix()))}
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Is4() || a.Is4In6() {
		return groups
	}
	if bits := p.ipv6Prefix(); bits > 48 {
		groups = append(groups, p.cfg.State.Hash("tokens "+AddressKey(ip, 48)))
	}
	return groups
}

// tokenBudget reports whether ip may have another token at now, and if
// not, when to ask again: the cluster's tokens for each of its groups over
// the sliding minute stay under TokensPerMinute (times SharedScale in a
// shared network). It also returns the token's slot and the group's
// tokens in the sliding minute (the puzzle's difficulty grows with them).
func (s *sessionState) tokenBudget(groups []uint64, shared bool, now time.Time) (ok bool, retry time.Duration, slot, recent int) {
	cfg := s.cfg
	nowMs := now.UnixMilli()
	frac := 1 - float64(nowMs%60_000)/60_000 // the previous minute's share of the sliding one
	limit := cfg.TokensPerMinute
	if shared {
		limit *= SharedScale
	}
	slot = 1
	ttlMinutes := int((cfg.TTL + time.Minute - 1) / time.Minute)
	for i, g := range groups {
		counts := s.budget.Issued(g, nowMs, 2)
		minute := float64(counts[0]) + float64(counts[1])*frac
		if i == 0 {
			recent = int(minute)
		}
		if minute >= float64(limit) {
			return false, time.Duration(60_000-nowMs%60_000) * time.Millisecond, 0, recent
		}
		if !shared {
			slot = max(slot, int(s.budget.Within(g, nowMs, ttlMinutes))+1)
		}
	}
	return true, 0, slot, recent
}

// reserveToken counts a token about to be issued to ip's groups at now
// and returns its slot; or, when the hard limit or the pace refuses it,
// how long to wait. With dry set it counts nothing: whether it would.
func (s *sessionState) reserveToken(groups []uint64, shared bool, now time.Time, dry bool) (slot int, retry time.Duration, ok bool) {
	ok, retry, slot, _ = s.tokenBudget(groups, shared, now)
	if !ok {
		return 0, retry, false
	}
	var undo tokens
	defer func() {
		if dry || !ok {
			undo.giveBack()
		}
	}()
	if !shared && slot <= s.cfg.Vouched {
		for _, g := range groups {
			taken, wait, u := s.pace.reserve(strconv.FormatUint(g, 16), 1, s.paceNow())
			if !taken {
				ok = false
				return 0, max(wait, time.Second), false
			}
			undo.add(u)
		}
	}
	if !dry {
		s.budget.Issue(groups, now.UnixMilli())
	}
	return slot, 0, true
}

// overBudget reports whether a token's slot is past what its poll vouches
// for.
func (s *sessionState) overBudget(slot int, quiz bool) bool {
	if s == nil || slot == 0 {
		return false
	}
	if quiz {
		return slot > s.cfg.QuizVouched
	}
	return slot > s.cfg.Vouched
}
