package buildinfo

import (
	"strings"
	"testing"
)

func TestReadNamesTheToolchain(t *testing.T) {
	i := Read()
	if i.GoVersion == "" || i.Version == "" || i.Revision == "" {
		t.Fatalf("empty fields: %+v", i)
	}
	if !strings.HasSuffix(i.String(), i.GoVersion) {
		t.Fatalf("String() = %q, want it to end with %s", i.String(), i.GoVersion)
	}
}

func TestStringShortensTheRevision(t *testing.T) {
	i := Info{Version: "v1.2.3", Revision: "0123456789abcdef0123", Modified: true, Time: "2026-12-01T00:00:00Z", GoVersion: "go1.26"}
	want := "v1.2.3 rev 0123456789ab (modified) 2026-12-01T00:00:00Z go1.26"
	if got := i.String(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
