// Package qr draws the QR codes of the voting and joining addresses a
// screen shows. A code costs ~13 ms of CPU to draw, so images are kept and
// new draws are limited node-wide: no client can turn the endpoint into a
// CPU sink; a refused draw is 429 with Retry-After.
package qr
