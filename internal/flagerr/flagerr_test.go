package flagerr

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tick", "fast"}, `--tick "fast": want a duration such as 250ms, 30s or 2m`},
		{[]string{"--n", "1e9"}, `--n "1e9": want a whole number`},
		{[]string{"--n", "99999999999999999999"}, `--n "99999999999999999999": want a whole number`},
		{[]string{"--f", "x"}, `--f "x": want a number`},
		{[]string{"--b=maybe"}, `--b "maybe": want true or false`},
		{[]string{"--tik", "1"}, `unknown flag --tik`},
		{[]string{"--tick"}, `--tick needs a value`},
		{[]string{"--s"}, `--s needs a value`},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Duration("tick", time.Second, "")
		fs.Int("n", 0, "")
		fs.Float64("f", 0, "")
		fs.Bool("b", false, "")
		fs.String("s", "", "")
		err := fs.Parse(c.args)
		if err == nil {
			t.Fatalf("%v parsed", c.args)
		}
		if got := Describe(fs, err).Error(); got != c.want || strings.Contains(got, "\n") {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}
