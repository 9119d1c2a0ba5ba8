package poll

import (
	"errors"
	"strings"
	"testing"
)

func valid() Definition {
	return Definition{ID: "p1", Question: "Who wins?", Options: []Option{{"a", "A"}, {"b", "B"}}, OpensAt: 1000, ClosesAt: 2000, GraceMs: 500}
}

func TestValidate(t *testing.T) {
	many := make([]Option, MaxOptions+1)
	for i := range many {
		many[i] = Option{ID: strings.Repeat("x", i+1), Label: "x"}
	}
	cases := map[string]func(d *Definition){
		"empty id":             func(d *Definition) { d.ID = "" },
		"id with space":        func(d *Definition) { d.ID = "a b" },
		"long question":        func(d *Definition) { d.Question = strings.Repeat("q", MaxQuestionLen+1) },
		"no question":          func(d *Definition) { d.Question = "" },
		"control in question":  func(d *Definition) { d.Question = "a\x07" },
		"one option":           func(d *Definition) { d.Options = d.Options[:1] },
		"zero options":         func(d *Definition) { d.Options = nil },
		"too many options":     func(d *Definition) { d.Options = many },
		"duplicate option ids": func(d *Definition) { d.Options[1].ID = "a" },
		"empty label":          func(d *Definition) { d.Options[0].Label = "" },
		"bad utf8 label":       func(d *Definition) { d.Options[0].Label = "\xff" },
		"closes before opens":  func(d *Definition) { d.ClosesAt = 999 },
		"closes at opens":      func(d *Definition) { d.ClosesAt = d.OpensAt },
		"no opens_at":          func(d *Definition) { d.OpensAt = 0 },
		"negative grace":       func(d *Definition) { d.GraceMs = -1 },
		"huge grace":           func(d *Definition) { d.GraceMs = MaxGrace.Milliseconds() + 1 },
		"too long open":        func(d *Definition) { d.ClosesAt = d.OpensAt + MaxDuration.Milliseconds() + 1 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			d := valid()
			d.Options = append([]Option(nil), d.Options...)
			mutate(&d)
			if err := d.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	d := valid()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestWindowAndStatus(t *testing.T) {
	d := valid() // opens 1000, closes 2000, grace 500
	cases := []struct {
		at     int64
		window Window
		status Status
	}{
		{999, BeforeOpen, Scheduled},
		{1000, InWindow, Open},
		{1999, InWindow, Open},
		{2000, InGrace, Closed},
		{2499, InGrace, Closed},
		{2500, AfterGrace, Closed},
	}
	for _, c := range cases {
		if w := d.WindowAt(c.at); w != c.window {
			t.Errorf("WindowAt(%d) = %v, want %v", c.at, w, c.window)
		}
		if s := d.StatusAt(c.at, false); s != c.status {
			t.Errorf("StatusAt(%d) = %v, want %v", c.at, s, c.status)
		}
	}
	if d.StatusAt(1500, true) != Reconciled {
		t.Error("reconciled flag ignored")
	}
}

func TestSpecDefaults(t *testing.T) {
	opts := []Option{{"a", "A"}, {"b", "B"}}
	d, err := Spec{Question: "Q?", Options: opts}.Definition(10_000)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID == "" || d.OpensAt != 10_000 || d.ClosesAt != 10_000+DefaultDuration.Milliseconds() || d.GraceMs != DefaultGrace.Milliseconds() {
		t.Fatalf("defaults: %+v", d)
	}
	dur, grace, closes := 30.0, 0.0, int64(50_000)
	d, err = Spec{ID: "x", Question: "Q?", Options: opts, DurationS: &dur, GraceS: &grace}.Definition(10_000)
	if err != nil || d.ClosesAt != 40_000 || d.GraceMs != 0 {
		t.Fatalf("duration: %+v %v", d, err)
	}
	if _, err := (Spec{Question: "Q?", Options: opts, DurationS: &dur, ClosesAt: &closes}).Definition(10_000); !errors.Is(err, ErrInvalid) {
		t.Fatalf("both closes_at and duration_s: %v", err)
	}
	neg := -1.0
	if _, err := (Spec{Question: "Q?", Options: opts, DurationS: &neg}).Definition(10_000); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative duration: %v", err)
	}
	early := int64(5_000)
	if _, err := (Spec{Question: "Q?", Options: opts, ClosesAt: &early}).Definition(10_000); !errors.Is(err, ErrInvalid) {
		t.Fatalf("closes_at before opens_at: %v", err)
	}
}
