// Package trust scores a vote from facts about its client at the moment it
// arrives (Signals): how soon the voter voted again, how busy and how
// crowded its address is, how old its voter token and socket are, whether
// the address is a datacenter's, whether its token is past its address's
// vouched budget. Score combines them into [0, 1]; votes under the floor
// are ledgered and acknowledged but not counted (shadowed).
//
// The node scores at ingest and keeps the signals in the vote's ledger
// record; an auditor re-runs Score on the exported records (tally ledger
// merge --rescore), so the package is the one both import. It imports
// ledger (the signals' stored form) and nothing else of Tally's.
package trust
