// Package tallyjs holds the JavaScript client (@tally/client, index.js)
// for a node to serve at /client.js: the page imports it from there, and
// so may the sites --origins names. The package itself is npm's; this Go
// file only embeds it. It imports nothing of this module.
package tallyjs
