package tallyjs

import _ "embed" // the client's source, fixed at build time

// Source is index.js, the client as this repository holds it.
//
//go:embed index.js
var Source []byte
