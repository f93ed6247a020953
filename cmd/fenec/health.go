package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// setupHealth is `fenec health URL [--ready]`: exit 0 when the server at
// URL answers /_health (or /_ready) 200 within --timeout, 1 otherwise. It is
// the health check of images that hold no shell and no curl.
func setupHealth(fs *flag.FlagSet, e *env) runFunc {
	ready := fs.Bool("ready", false, "ask /_ready (serving and holding its directory) rather than /_health (alive)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	quiet := fs.Bool("quiet", false, "print nothing when healthy")
	addTLSFlags(fs, e)
	return func(ctx context.Context, pos []string) error {
		if err := wantArgs(pos, 1, "one URL"); err != nil {
			return err
		}
		if *timeout <= 0 {
			return fmt.Errorf("%w: --timeout must be positive", errUsage)
		}
		target, err := healthURL(pos[0], *ready)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		hc, err := e.httpClient()
		if err != nil {
			return err
		}
		defer hc.CloseIdleConnections()
		res, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s: %s", target, res.Status, strings.TrimSpace(string(b)))
		}
		if !*quiet {
			fmt.Fprintf(e.stdout, "%s: %s\n", target, strings.TrimSpace(string(b)))
		}
		return nil
	}
}

// healthURL is the check's URL: URL's path when it names one, else
// /_health (or /_ready).
func healthURL(s string, ready bool) (string, error) {
	u, err := url.Parse(nodeURL(s))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: URL %q: want http://host:port", errUsage, s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/_health"
		if ready {
			u.Path = "/_ready"
		}
	}
	return u.String(), nil
}
