package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

// healthcheck asks the node's /readyz and exits 0 when it answers 200:
// the container HEALTHCHECK. By default it asks the node in the same
// container, at $TALLY_HTTP_ADDR's port on loopback, over HTTPS when
// $TALLY_TLS_CERT is set.
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally-node healthcheck", flag.ContinueOnError)
	fs.SetOutput(stdout)
	target := fs.String("url", defaultHealthURL(), "the readiness address to ask")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tally-node healthcheck [--url URL] [--timeout D]\n\nExit status 0 when URL answers 200, 1 otherwise.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil || fs.NArg() > 0 {
		return 2
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
	fmt.Fprintf(stdout, "ready\n")
	return 0
}

func defaultHealthURL() string {
	port := "8080"
	if addr := os.Getenv("TALLY_HTTP_ADDR"); addr != "" {
		if _, p, err := net.SplitHostPort(addr); err == nil && p != "" && p != "0" {
			port = p
		}
	}
	scheme := "http"
	if os.Getenv("TALLY_TLS_CERT") != "" {
		scheme = "https"
	}
	return scheme + "://127.0.0.1:" + port + "/readyz"
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
