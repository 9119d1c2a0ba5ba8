// Package archtest holds no code, only tests of the source tree's shape:
// the layering of DESIGN.md's room table (which package may import which
// of the project's) and the sizes a newcomer can read (methods per type,
// lines per function, files per package). They parse the tree with
// go/parser; nothing is built.
package archtest
