package poll

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// t0 is 2026-11-30 00:00 UTC in Unix ms: the tests' "now".
const t0 int64 = 1_796_083_200_000

func valid() Definition {
	return Definition{ID: "p1", Question: "Who wins?", Options: []Option{{"a", "A"}, {"b", "B"}}, OpensAt: t0 + 1000, ClosesAt: t0 + 2000, GraceMs: 500}
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
		"closes before opens":  func(d *Definition) { d.ClosesAt = d.OpensAt - 1 },
		"closes at opens":      func(d *Definition) { d.ClosesAt = d.OpensAt },
		"no opens_at":          func(d *Definition) { d.OpensAt = 0 },
		"negative grace":       func(d *Definition) { d.GraceMs = -1 },
		"huge grace":           func(d *Definition) { d.GraceMs = MaxGrace.Milliseconds() + 1 },
		"too long open":        func(d *Definition) { d.ClosesAt = d.OpensAt + MaxDuration.Milliseconds() + 1 },
		"closes at max int64":  func(d *Definition) { d.ClosesAt = math.MaxInt64 },
		"opens at min int64":   func(d *Definition) { d.OpensAt = math.MinInt64 },
		"opens before 2000":    func(d *Definition) { d.OpensAt, d.ClosesAt = MinTime-1, MinTime+1000 },
		"closes after 2200":    func(d *Definition) { d.OpensAt, d.ClosesAt = MaxTime-1000, MaxTime+1 },
		"grace max int64":      func(d *Definition) { d.GraceMs = math.MaxInt64 },
		"tiny ip rate":         func(d *Definition) { d.Limits = &Limits{IPRate: 1e-300} },
		"negative voter rate":  func(d *Definition) { d.Limits = &Limits{VoterRate: -1} },
		"NaN rate":             func(d *Definition) { d.Limits = &Limits{IPRate: math.NaN()} },
		"infinite rate":        func(d *Definition) { d.Limits = &Limits{IPRate: math.Inf(1)} },
		"rate over max":        func(d *Definition) { d.Limits = &Limits{VoterRate: MaxRate * 2} },
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
	for name, mutate := range map[string]func(d *Definition){
		"as given":           func(d *Definition) {},
		"longest window":     func(d *Definition) { d.ClosesAt = d.OpensAt + MaxDuration.Milliseconds() },
		"window at MaxTime":  func(d *Definition) { d.OpensAt, d.ClosesAt, d.GraceMs = MaxTime-1, MaxTime, MaxGrace.Milliseconds() },
		"window at MinTime":  func(d *Definition) { d.OpensAt, d.ClosesAt = MinTime, MinTime+1 },
		"rates at the floor": func(d *Definition) { d.Limits = &Limits{IPRate: MinRate, VoterRate: MinRate} },
		"rates at the top":   func(d *Definition) { d.Limits = &Limits{IPRate: MaxRate, VoterRate: MaxRate} },
		"rates zero":         func(d *Definition) { d.Limits = &Limits{} },
		"32 options":         func(d *Definition) { d.Options = many[:MaxOptions] },
	} {
		d := valid()
		mutate(&d)
		if err := d.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestAddMsSaturates(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 5, 10, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MinInt64 + 5, -10, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
		{-5, 3, -2},
	} {
		if got := AddMs(c.a, c.b); got != c.want {
			t.Errorf("AddMs(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	d := Definition{ClosesAt: math.MaxInt64, GraceMs: math.MaxInt64}
	if d.GraceEnd() != math.MaxInt64 || d.WindowAt(t0) != InWindow {
		t.Fatalf("a window at the end of time: end %d, window %v", d.GraceEnd(), d.WindowAt(t0))
	}
}

func TestWindowAndStatus(t *testing.T) {
	d := valid() // opens t0+1000, closes t0+2000, grace 500
	cases := []struct {
		at     int64
		window Window
		status Status
	}{
		{t0 + 999, BeforeOpen, Scheduled},
		{t0 + 1000, InWindow, Open},
		{t0 + 1999, InWindow, Open},
		{t0 + 2000, InGrace, Closed},
		{t0 + 2499, InGrace, Closed},
		{t0 + 2500, AfterGrace, Closed},
	}
	for _, c := range cases {
		if w := d.WindowAt(c.at); w != c.window {
			t.Errorf("WindowAt(%d) = %v, want %v", c.at, w, c.window)
		}
		if s := d.StatusAt(c.at, false); s != c.status {
			t.Errorf("StatusAt(%d) = %v, want %v", c.at, s, c.status)
		}
	}
	if d.StatusAt(t0+1500, true) != Reconciled {
		t.Error("reconciled flag ignored")
	}
}

func TestSpecDefaults(t *testing.T) {
	opts := []Option{{"a", "A"}, {"b", "B"}}
	d, err := Spec{Question: "Q?", Options: opts}.Definition(t0)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID == "" || d.OpensAt != t0 || d.ClosesAt != t0+DefaultDuration.Milliseconds() || d.GraceMs != DefaultGrace.Milliseconds() {
		t.Fatalf("defaults: %+v", d)
	}
	dur, grace := 30.0, 0.0
	d, err = Spec{ID: "x", Question: "Q?", Options: opts, DurationS: &dur, GraceS: &grace}.Definition(t0)
	if err != nil || d.ClosesAt != t0+30_000 || d.GraceMs != 0 {
		t.Fatalf("duration: %+v %v", d, err)
	}
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	bad := map[string]Spec{
		"closes_at and duration_s": {DurationS: &dur, ClosesAt: i64(t0 + 50_000)},
		"negative duration":        {DurationS: f64(-1)},
		"zero duration":            {DurationS: f64(0)},
		"NaN duration":             {DurationS: f64(math.NaN())},
		"infinite duration":        {DurationS: f64(math.Inf(1))},
		"duration over 7 days":     {DurationS: f64(MaxDuration.Seconds() + 1)},
		"closes_at in the past":    {ClosesAt: i64(t0 - 5_000)},
		"closes_at now":            {ClosesAt: i64(t0)},
		"closes_at max int64":      {ClosesAt: i64(math.MaxInt64)},
		"opens_at max int64":       {OpensAt: i64(math.MaxInt64)},
		"opens_at min int64":       {OpensAt: i64(math.MinInt64)},
		"opens_at past lead":       {OpensAt: i64(t0 + MaxLead.Milliseconds() + 1)},
		"opens_at long ago":        {OpensAt: i64(t0 - MaxDuration.Milliseconds() - 1)},
		"NaN grace":                {GraceS: f64(math.NaN())},
		"grace over max":           {GraceS: f64(MaxGrace.Seconds() + 1)},
		"tiny rate":                {Limits: &Limits{IPRate: 1e-300}},
	}
	for name, s := range bad {
		s.Question, s.Options = "Q?", opts
		if _, err := s.Definition(t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	good := map[string]Spec{
		"scheduled at the lead":  {OpensAt: i64(t0 + MaxLead.Milliseconds()), DurationS: f64(MaxDuration.Seconds())},
		"opened a week ago":      {OpensAt: i64(t0 - MaxDuration.Milliseconds() + 1), ClosesAt: i64(t0 + 1)},
		"shortest":               {DurationS: f64(0.001), GraceS: f64(0)},
		"longest grace":          {GraceS: f64(MaxGrace.Seconds())},
		"closes one ms from now": {ClosesAt: i64(t0 + 1)},
	}
	for name, s := range good {
		s.Question, s.Options = "Q?", opts
		if _, err := s.Definition(t0); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzSpecDefinition: whatever times a client sends, a definition either
// is refused as invalid or lies within the documented bounds, and its
// window ends are ordered (no arithmetic wrapped).
func FuzzSpecDefinition(f *testing.F) {
	f.Add(t0, int64(0), int64(0), 0.0, 0.0, uint8(0))
	f.Add(t0, int64(math.MaxInt64), int64(0), 0.0, 0.0, uint8(2))
	f.Add(t0, int64(0), int64(math.MinInt64), 60.0, 2.0, uint8(5))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 1e300, 1e300, uint8(7))
	f.Fuzz(func(t *testing.T, now, opens, closes int64, dur, grace float64, which uint8) {
		s := Spec{Question: "Q?", Options: []Option{{"a", "A"}, {"b", "B"}}}
		if which&1 != 0 {
			s.OpensAt = &opens
		}
		if which&2 != 0 {
			s.ClosesAt = &closes
		}
		if which&4 != 0 {
			s.DurationS = &dur
		}
		if which&8 != 0 {
			s.GraceS = &grace
		}
		d, err := s.Definition(now)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if d.OpensAt < MinTime || d.ClosesAt > MaxTime || d.ClosesAt <= d.OpensAt || d.GraceEnd() < d.ClosesAt ||
			d.ClosesAt-d.OpensAt > MaxDuration.Milliseconds() || d.GraceMs < 0 || d.GraceMs > MaxGrace.Milliseconds() {
			t.Fatalf("accepted out of bounds: %+v", d)
		}
		if d.WindowAt(d.OpensAt) != InWindow || d.WindowAt(d.ClosesAt) != InGrace && d.GraceMs > 0 || d.WindowAt(d.GraceEnd()) != AfterGrace {
			t.Fatalf("windows out of order: %+v", d)
		}
	})
}

// FuzzWindowAt: for any definition a peer could send (valid or not), the
// windows are monotone in time: a later stamp is never in an earlier window.
func FuzzWindowAt(f *testing.F) {
	f.Add(t0, t0+1000, int64(500), t0, t0+10)
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(0), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, opens, closes, grace, a, b int64) {
		d := Definition{OpensAt: opens, ClosesAt: closes, GraceMs: grace}
		if a > b {
			a, b = b, a
		}
		if d.OpensAt <= d.ClosesAt && grace >= 0 && d.WindowAt(a) > d.WindowAt(b) {
			t.Fatalf("%+v: WindowAt(%d)=%v after WindowAt(%d)=%v", d, a, d.WindowAt(a), b, d.WindowAt(b))
		}
	})
}
