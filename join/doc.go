// Package join resolves join codes (ids.JoinCode): six characters a
// viewer types instead of scanning. GET /v1/join/{code} says what a code
// names and the page to open; GET /j/{code} opens it (the address a screen
// prints). A code is resolved by computing the codes of the polls, events
// and quizzes the node holds; the index is rebuilt at most once a second,
// so a stranger trying codes costs a map lookup each.
package join
