package flagerr

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Explain turns the flag package's bare "parse error" (and "value out of
// range") into what the flag expects.
func Explain(f *flag.Flag, err error) error {
	if s := err.Error(); s != "parse error" && s != "value out of range" {
		return err
	}
	if want := Expects(f); want != "" {
		return errors.New("want " + want)
	}
	return err
}

// Expects says what kind of value a flag takes.
func Expects(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return "a duration such as 250ms, 30s or 2m"
	case bool:
		return "true or false"
	case int, int64, uint, uint64:
		return "a whole number"
	case float64:
		return "a number"
	}
	return ""
}

var invalidFlag = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([\w-]+): (.*)$`)

// Describe rewrites an error of flag.FlagSet.Parse as one line
// in the operator's terms: "--tick "fast": want a duration such as 250ms,
// 30s or 2m", "unknown flag --tik", "--tick needs a value".
func Describe(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m := invalidFlag.FindStringSubmatch(msg); m != nil {
		value, name, cause := m[1], m[2], errors.New(m[3])
		if f := fs.Lookup(name); f != nil {
			cause = Explain(f, cause)
		}
		return fmt.Errorf("--%s %q: %v", name, value, cause)
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Errorf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("--%s needs a value", name)
	}
	return err
}
