package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// followParent makes a node started by `go run ./cmd/node` stop gracefully
// when `go run` itself is stopped: go run does not pass SIGTERM on, so the
// node would be left running without a parent. Only a binary in go run's
// build cache asks for this; an installed binary keeps its parent's choice.
func followParent() {
	exe, err := os.Executable()
	if err != nil || !strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return
	}
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	if os.Getppid() == 1 { // the parent is already gone
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
