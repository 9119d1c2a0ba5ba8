package fleet

import (
	"bytes"
	_ "embed"
)

// figuresJSON is bench/fleet/figures.json as of the build: the last run of
// bench/fleet-figures.sh, which writes both files (go:embed cannot reach
// outside this package's directory; TestDefaultFiguresAreTheBenchFile
// keeps the two the same).
//
//go:embed figures.json
var figuresJSON []byte

// DefaultFiguresName says where Default's figures came from, for a
// plan's header.
const DefaultFiguresName = "built in (bench/fleet/figures.json)"

// Default is the figures carried in the binary: what `tally fleet plan`
// reads without --figures, from any working directory.
func Default() (Figures, error) {
	return ReadFigures(bytes.NewReader(figuresJSON))
}
