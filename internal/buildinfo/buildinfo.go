package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// stamped, when set at link time (-ldflags "-X tally/internal/buildinfo.stamped=v1.2.3"),
// is the version: image builds have no .git for Go to read.
var stamped string

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`   // module version, "(devel)" for a source build
	Revision  string `json:"revision"`  // VCS commit, "unknown" when not stamped
	Time      string `json:"time"`      // commit time (RFC 3339), "" when not stamped
	Modified  bool   `json:"modified"`  // built from a tree with uncommitted changes
	GoVersion string `json:"goversion"` // the Go toolchain that built it
}

// Read returns the running binary's build information.
func Read() Info {
	info := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if stamped != "" {
			info.Version = stamped
		}
		return info
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	if stamped != "" {
		info.Version = stamped
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line --version prints, like
// "tally-node (devel) rev 1a2b3c4d5e6f (modified) 2026-12-01T00:00:00Z go1.26.0".
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	s := fmt.Sprintf("%s rev %s", i.Version, rev)
	if i.Modified {
		s += " (modified)"
	}
	if i.Time != "" {
		s += " " + i.Time
	}
	return s + " " + i.GoVersion
}
