// Package ids validates the identifiers and client-chosen text that cross
// Tally's boundaries: poll, option and replica ids (short, plain, safe in
// keys, file names and vote ids) and free text such as voter ids,
// idempotency keys, questions and labels. It imports nothing of this
// module, so every package that validates input shares one set of rules.
package ids
