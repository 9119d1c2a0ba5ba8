// Package names puts quiz participants' display names in one form and
// tells which of them look alike, so a leaderboard shows no two names a
// viewer would take for one and a name filter sees the letters it
// matches, however they were styled.
//
// Normalize maps a name as the PRECIS Nickname profile does (RFC 8266
// §2.2): Unicode spaces become the plain space, spaces at the ends go and
// runs of them become one, and the text is put in NFKC, which turns
// styled letters (mathematical bold 𝐟, fullwidth ｆ, circled ⓕ, ligatures,
// half-width katakana) into the letters they style. The profile's rules
// are applied with golang.org/x/text/unicode/norm rather than by
// golang.org/x/text/secure/precis, whose FreeformClass would also refuse
// the emoji sequences and flags Tally's names allow (which names are
// well formed is ledger.ValidName's rule, not this package's).
//
// Keys gives a name's look-alike keys: the skeleton of Unicode's
// confusable detection (UTS #39) of the name as written and of it case
// folded. Two names look alike when they share a key: "Аnn" with a
// Cyrillic А and "Ann", "Ιan" with a Greek Ι and "lan", "ANN" and "Ann".
// The confusables table is Unicode's (github.com/mtibben/confusables,
// generated from confusables.txt), some six thousand mappings across
// every script that no hand-written table would keep up with.
//
// Names are normalised where they are taken (package api) and compared
// where a quiz's names are kept (package state). It imports nothing of
// this module; everything in it is a pure function, safe for concurrent
// use.
package names
