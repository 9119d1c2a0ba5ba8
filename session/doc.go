// Package session issues and checks the signed voter tokens that stand in
// for a login, and the proof-of-work puzzles that make each token cost a
// script some CPU.
//
// A token carries a random voter id, its issue time and a hash of the
// client's IP address and user agent, signed with HMAC-SHA256 under a
// secret every region shares, so any region can check a token another
// issued. A challenge is signed the same way and carries its difficulty
// and expiry; a solution is a nonce whose SHA-256 with the challenge has
// that many leading zero bits, accepted once.
//
// It imports nothing of this module.
package session
