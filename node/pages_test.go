package node

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"tally/internal/flagerr"
)

// TestPagesLimitImagesToLogoHosts: every page response — the views, the
// home page and its files — carries a Content-Security-Policy whose
// img-src is this node, data: and the --logo-hosts over https, besides
// its frame-ancestors; the views name the same hosts to the page.
func TestPagesLimitImagesToLogoHosts(t *testing.T) {
	paths := []string{"/", "/app.js", "/present/p", "/overlay/p", "/embed/p", "/present/event/e", "/overlay/event/e", "/present/quiz/q", "/overlay/quiz/q"}
	for _, c := range []struct {
		name, img, meta string
		hosts           []string
	}{
		{"listed", "img-src 'self' data: https://cdn.example.com https://logos.example.org", `<meta name="tally-logo-hosts" content="cdn.example.com logos.example.org">`, []string{"cdn.example.com", "logos.example.org"}},
		{"none", "img-src 'self' data:", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := startNode(t, t.TempDir(), func(cfg *Config) {
				cfg.LogoHosts = c.hosts
				cfg.Origins = []string{"*.broadcaster.example"}
			})
			for _, path := range paths {
				r := tn.call(t, "GET", path, "")
				if r.status != 200 {
					t.Fatalf("%s: %d", path, r.status)
				}
				directives := strings.Split(r.header.Get("Content-Security-Policy"), "; ")
				ancestors := "frame-ancestors 'self'"
				if strings.HasPrefix(path, "/embed/") {
					ancestors = "frame-ancestors 'self' https://*.broadcaster.example http://*.broadcaster.example"
				}
				if len(directives) < 2 || directives[0] != ancestors || directives[1] != c.img { // the rest: TestBrowserPagesKeepAStrictCSP
					t.Fatalf("%s: CSP %q, want %q; %q", path, r.header.Get("Content-Security-Policy"), ancestors, c.img)
				}
				if path != "/" && path != "/app.js" && c.meta != "" && !strings.Contains(r.raw, c.meta) {
					t.Fatalf("%s does not name the logo hosts to the page:\n%s", path, r.raw)
				}
				if path != "/app.js" && c.meta == "" && strings.Contains(r.raw, "tally-logo-hosts") {
					t.Fatalf("%s names logo hosts though there are none", path)
				}
			}
		})
	}
}

// TestLogoHostsFlag: --logo-hosts (or $TALLY_LOGO_HOSTS) takes
// comma-separated host names, lower-cased; anything else is refused at
// start with one line naming the flag, since each name goes into the
// Content-Security-Policy header as it is.
func TestLogoHostsFlag(t *testing.T) {
	parse := func(args ...string) (Config, *flag.FlagSet, error) {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.RegisterFlags(fs)
		return cfg, fs, fs.Parse(args)
	}
	cfg, _, err := parse("--logo-hosts", " CDN.example.com, logos.example.org ,,192.0.2.7")
	if err != nil || strings.Join(cfg.LogoHosts, " ") != "cdn.example.com logos.example.org 192.0.2.7" {
		t.Fatalf("%v %q", err, cfg.LogoHosts)
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("TALLY_LOGO_HOSTS", "cdn.example.com")
		if cfg, _, err := parse(); err != nil || len(cfg.LogoHosts) != 1 || cfg.LogoHosts[0] != "cdn.example.com" {
			t.Fatalf("%v %q", err, cfg.LogoHosts)
		}
	})
	for _, bad := range []string{"https://cdn.example.com", "cdn.example.com:8443", "*.example.com", "cdn.example.com/logo.png",
		"cdn example.com", "cdn.example.com;script-src *", "-cdn.example.com", "cdn.example.com.", "'self'", "bücher.example"} {
		_, fs, err := parse("--logo-hosts", bad)
		if err == nil {
			t.Fatalf("--logo-hosts %q accepted", bad)
		}
		if msg := flagerr.Describe(fs, err).Error(); !strings.HasPrefix(msg, "--logo-hosts ") || strings.Contains(msg, "\n") {
			t.Fatalf("--logo-hosts %q: %q", bad, msg)
		}
	}
	t.Run("bad env", func(t *testing.T) {
		t.Setenv("TALLY_LOGO_HOSTS", "https://cdn.example.com")
		cfg, _, err := parse()
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = t.TempDir()
		if _, err := Open(cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--logo-hosts") || !strings.Contains(err.Error(), "$TALLY_LOGO_HOSTS") {
			t.Fatalf("New: %v", err)
		}
	})
	// A Config built by hand is checked as the flag is.
	cfg = DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	cfg.LogoHosts = []string{"cdn.example.com", "evil.example; img-src *"}
	if _, err := Open(cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--logo-hosts") {
		t.Fatalf("New: %v", err)
	}
}

// --origins names the sites whose pages may make their visitors vote: a
// pattern that lets in every site, or a whole top-level domain, is
// refused at start (issue 58's review: "*" switched the rule off).
func TestOriginsFlagRefusesEverySite(t *testing.T) {
	parse := func(v string) ([]string, error) {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.RegisterFlags(fs)
		err := fs.Parse([]string{"--origins", v})
		return cfg.Origins, err
	}
	for _, good := range []string{"www.example.com", "*.example.com", "partner.example:*", "127.0.0.1:*", "tv.example:8443", "*.news.example.co.uk"} {
		if got, err := parse(good); err != nil || len(got) != 1 {
			t.Errorf("--origins %s: %v %v", good, got, err)
		}
	}
	for _, bad := range []string{"*", "*:*", "*:443", "*.*", "*.com", "*com", "?*", "[a-z]*", "www.example.com,*", "*.", "a*.example"} {
		if _, err := parse(bad); err == nil || !strings.Contains(err.Error(), "every site") {
			t.Errorf("--origins %s: %v, want a refusal saying it lets in every site", bad, err)
		}
	}
}
