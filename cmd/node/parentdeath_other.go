//go:build !linux

package main

// followParent does nothing where the kernel cannot signal a child when
// its parent dies: stop the node with Ctrl-C, or build it first.
func followParent() {}
