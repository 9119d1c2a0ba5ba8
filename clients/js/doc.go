// Package tallyjs holds the JavaScript client (index.js) for a node to
// serve at /client.js: the page imports it from there, and so may the
// sites --origins names. The client is on no package registry: programs
// copy index.js or fetch /client.js (README.md). This Go file only embeds
// it. It imports nothing of this module.
package tallyjs
