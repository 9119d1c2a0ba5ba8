// Package web embeds the page a node serves at /: plain HTML, CSS and
// JavaScript ES modules with no build step, which import the JavaScript
// client (clients/js) that the node serves beside them at /client.js.
// It imports nothing of this module.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS returns the page's files, rooted at the directory holding index.html.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}
