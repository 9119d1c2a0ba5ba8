package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"tally/node"
)

// healthcheck asks the node's /readyz and exits 0 when it answers 200:
// the container HEALTHCHECK. By default it asks the node in the same
// container, at $TALLY_HTTP_ADDR's port on loopback, over HTTPS when
// $TALLY_TLS_CERT is set.
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally-node healthcheck", flag.ContinueOnError)
	fs.SetOutput(stdout)
	target := fs.String("url", "", "the readiness address to ask (default: this machine's node, at the port and scheme of its --http-addr and --tls-cert from $TALLY_HTTP_ADDR, $TALLY_TLS_CERT or --config)")
	configFile := fs.String("config", os.Getenv("TALLY_CONFIG"), "the node's YAML settings file, for the default --url [$TALLY_CONFIG]")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tally-node healthcheck [--url URL] [--timeout D]\n\nExit status 0 when URL answers 200, 1 otherwise.\n\nflags:\n")
		fs.PrintDefaults()
	}
	var out bytes.Buffer
	fs.SetOutput(&out)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		stdout.Write(out.Bytes())
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "tally-node healthcheck: %v (tally-node healthcheck --help lists the flags)\n", err)
		return 2
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tally-node healthcheck: unexpected argument %q (tally-node healthcheck --help lists the flags)\n", fs.Arg(0))
		return 2
	}
	if *target == "" {
		u, err := defaultHealthURL(*configFile)
		if err != nil {
			fmt.Fprintf(stderr, "tally-node healthcheck: %v\n", err)
			return 2
		}
		*target = u
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		fmt.Fprintf(stderr, "tally-node healthcheck: %q is not an http(s) URL\n", *target)
		return 2
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if host := u.Hostname(); u.Scheme == "https" && isLoopback(host) {
		// The node's own certificate names its public host, not loopback;
		// a check inside the container trusts the address itself.
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback only
	}
	client := &http.Client{Timeout: *timeout, Transport: tr}
	res, err := client.Get(*target)
	if err != nil {
		fmt.Fprintf(stderr, "tally-node healthcheck: %v\n", err)
		return 1
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "tally-node healthcheck: %s answered %d: %s\n", *target, res.StatusCode, body)
		return 1
	}
	var ready struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &ready) != nil || ready.Status != "ready" {
		fmt.Fprintf(stderr, "tally-node healthcheck: %s answered 200 but not as a node's /readyz does (%q): is it the node's readiness address?\n", *target, truncate(body, 80))
		return 1
	}
	fmt.Fprintf(stdout, "ready\n")
	return 0
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// defaultHealthURL is the readiness address of the node on this machine:
// its settings as the node reads them (--config file, then TALLY_*),
// asked on loopback at its HTTP port, over HTTPS when it has a
// certificate.
func defaultHealthURL(configFile string) (string, error) {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("tally-node", flag.ContinueOnError)
	cfg.RegisterFlags(fs) // reads TALLY_*
	if configFile != "" {
		if err := cfg.ApplyFile(fs, configFile); err != nil {
			return "", err
		}
	}
	port := "8080"
	if _, p, err := net.SplitHostPort(cfg.HTTPAddr); err == nil && p != "" && p != "0" {
		port = p
	}
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://127.0.0.1:" + port + "/readyz", nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
