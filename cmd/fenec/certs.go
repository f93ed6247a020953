package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// setupCerts is `fenec certs`: it makes what a test or compose cluster
// speaks TLS with, in one command: a CA (kept, and reused by a later run
// to issue more), for each NAME a certificate and key, valid both to
// serve and as a client certificate, naming NAME and the hosts given with
// it, and the routers' key node tokens are sealed under in the directory
// (kept too).
func setupCerts(fset *flag.FlagSet, e *env) runFunc {
	out := fset.String("out", "certs", "write the files into `DIR` (created; an existing CA and key in it are reused)")
	days := fset.Int("days", 365, "the certificates' validity in `DAYS`")
	caDays := fset.Int("ca-days", 3650, "a new CA's validity in `DAYS`")
	loopback := fset.Bool("loopback", true, "also name localhost, 127.0.0.1 and ::1 in every certificate")
	return func(_ context.Context, names []string) error {
		return makeCerts(e.stdout, *out, *days, *caDays, *loopback, names)
	}
}

// makeCerts writes the CA, the key and a certificate for each name into
// out.
func makeCerts(stdout io.Writer, out string, days, caDays int, loopback bool, names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%w: name at least one certificate: NAME or NAME=HOST,HOST,...", errUsage)
	}
	if days < 1 || caDays < 1 {
		return fmt.Errorf("%w: --days and --ca-days must be at least 1", errUsage)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ca, made, err := loadOrMakeCA(out, time.Duration(caDays)*24*time.Hour)
	if err != nil {
		return err
	}
	if made {
		fmt.Fprintf(stdout, "CA        %s (its key %s: keep it off the cluster's machines)\n", filepath.Join(out, "ca.pem"), filepath.Join(out, "ca-key.pem"))
	} else {
		fmt.Fprintf(stdout, "CA        %s (reused)\n", filepath.Join(out, "ca.pem"))
	}
	keyPath := filepath.Join(out, "directory.key")
	switch _, err := os.Stat(keyPath); {
	case errors.Is(err, fs.ErrNotExist):
		if err := tlsx.WriteFile(keyPath, []byte(global.NewKeyText()+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key       %s (fenec-shard --directory-key-file: every router needs it)\n", keyPath)
	case err != nil:
		return err
	}
	for _, arg := range names {
		name, hosts := splitCertArg(arg, loopback)
		if !tenantName.MatchString(name) {
			return fmt.Errorf("%w: certificate name %q must be [a-z0-9_-]{1,64}", errUsage, name)
		}
		leaf, err := ca.Issue(name, hosts, time.Duration(days)*24*time.Hour)
		if err != nil {
			return fmt.Errorf("issue %s: %w", name, err)
		}
		cert, key := filepath.Join(out, name+".pem"), filepath.Join(out, name+"-key.pem")
		if err := leaf.Write(cert, key); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-9s %s %s for %s\n", name, cert, key, strings.Join(hosts, ", "))
	}
	return nil
}

// loadOrMakeCA reuses dir's CA, or makes one; made says which.
func loadOrMakeCA(dir string, validity time.Duration) (*tlsx.CA, bool, error) {
	cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	ca, err := tlsx.LoadCA(cert, key)
	if err == nil {
		return ca, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("the CA in %s: %w", dir, err)
	}
	if ca, err = tlsx.NewCA("fenec CA", validity); err != nil {
		return nil, false, err
	}
	if err := ca.WriteCA(cert, key); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

// splitCertArg reads NAME or NAME=HOST,HOST: the name is always a host
// of its certificate, and so is loopback when asked.
func splitCertArg(arg string, loopback bool) (string, []string) {
	name, rest, _ := strings.Cut(arg, "=")
	hosts := []string{name}
	for _, h := range strings.Split(rest, ",") {
		if h = strings.TrimSpace(h); h != "" && h != name {
			hosts = append(hosts, h)
		}
	}
	if loopback {
		hosts = append(hosts, "localhost", "127.0.0.1", "::1")
	}
	return name, hosts
}
