// Package ids validates the identifiers and client-chosen text that cross
// Tally's boundaries: poll, option and replica ids (short, plain, safe in
// keys, file names and vote ids) and free text such as voter ids,
// idempotency keys, questions and labels; and the keyed hash the voter
// state holds voter ids and keys by (Hash), which an auditor recomputes to
// name quiz participants. It imports nothing of this module, so every
// package that validates input shares one set of rules.
package ids
