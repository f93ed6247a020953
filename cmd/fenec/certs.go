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
	"github.com/fenec-go/fenec/wire"
)

// setupCerts is `fenec certs`: it makes what a test or compose cluster
// speaks TLS with, in one command: a CA (kept, and reused by a later run
// to issue more), for each NAME a certificate and key, valid both to
// serve and as a client certificate, naming NAME and the hosts given with
// it, and the routers' key node tokens are sealed under in the directory
// and the password its etcd takes (kept too). With --etcd the names'
// certificates come from the directory's own CA instead (etcd-ca.pem):
// the routers' certificates for their etcd members' ports and their etcd
// clients, which no node's or client's certificate of the first CA can
// reach.
func setupCerts(fset *flag.FlagSet, e *env) runFunc {
	out := fset.String("out", "certs", "write the files into `DIR` (created; an existing CA and key in it are reused)")
	days := fset.Int("days", 365, "the certificates' validity in `DAYS`")
	caDays := fset.Int("ca-days", 3650, "a new CA's validity in `DAYS`")
	loopback := fset.Bool("loopback", true, "also name localhost, 127.0.0.1 and ::1 in every certificate")
	etcd := fset.Bool("etcd", false, "issue the routers' directory certificates (NAME-etcd.pem, for --etcd-cert) from the directory's own CA (etcd-ca.pem, for --etcd-ca)")
	return func(_ context.Context, names []string) error {
		return makeCerts(e.stdout, certsRun{out: *out, days: *days, caDays: *caDays, loopback: *loopback, etcd: *etcd}, names)
	}
}

// certsRun is what one `fenec certs` makes.
type certsRun struct {
	out          string
	days, caDays int
	loopback     bool
	etcd         bool // from the directory's CA
}

// makeCerts writes the CAs, the key, the password and a certificate for
// each name into r.out.
func makeCerts(stdout io.Writer, r certsRun, names []string) error {
	out, days, caDays, loopback := r.out, r.days, r.caDays, r.loopback
	if len(names) == 0 {
		return fmt.Errorf("%w: name at least one certificate: NAME or NAME=HOST,HOST,...", errUsage)
	}
	if days < 1 || caDays < 1 {
		return fmt.Errorf("%w: --days and --ca-days must be at least 1", errUsage)
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	caName, caFile, suffix := "fenec CA", "ca", ""
	if r.etcd {
		caName, caFile, suffix = "fenec directory CA", "etcd-ca", "-etcd"
	}
	ca, made, err := loadOrMakeCA(out, caName, caFile, time.Duration(caDays)*24*time.Hour)
	if err != nil {
		return err
	}
	if made {
		fmt.Fprintf(stdout, "CA        %s (its key %s: keep it off the cluster's machines)\n", filepath.Join(out, caFile+".pem"), filepath.Join(out, caFile+"-key.pem"))
	} else {
		fmt.Fprintf(stdout, "CA        %s (reused)\n", filepath.Join(out, caFile+".pem"))
	}
	for _, sec := range []struct{ file, flag string }{
		{"directory.key", "--directory-key-file"}, {"directory.password", "--directory-password-file"},
	} {
		if err := makeSecret(stdout, filepath.Join(out, sec.file), sec.flag); err != nil {
			return err
		}
	}
	for _, arg := range names {
		name, hosts := splitCertArg(arg, loopback)
		if !wire.ValidName(name) {
			return fmt.Errorf("%w: certificate name %q must be [a-z0-9_-]{1,64}", errUsage, name)
		}
		leaf, err := ca.Issue(name, hosts, time.Duration(days)*24*time.Hour)
		if err != nil {
			return fmt.Errorf("issue %s: %w", name, err)
		}
		cert, key := filepath.Join(out, name+suffix+".pem"), filepath.Join(out, name+suffix+"-key.pem")
		if err := leaf.Write(cert, key); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-9s %s %s for %s\n", name, cert, key, strings.Join(hosts, ", "))
	}
	return nil
}

// makeSecret writes a new key or password at path unless one is there:
// every router of a deployment reads the same file.
func makeSecret(stdout io.Writer, path, flag string) error {
	switch _, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		text := global.NewKeyText()
		if flag == "--directory-password-file" {
			text = global.NewPasswordText()
		}
		if err := tlsx.WriteFile(path, []byte(text+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "secret    %s (fenec-shard %s: every router needs it)\n", path, flag)
		return nil
	default:
		return err
	}
}

// loadOrMakeCA reuses dir's CA named file (file.pem, file-key.pem), or
// makes one named name; made says which.
func loadOrMakeCA(dir, name, file string, validity time.Duration) (*tlsx.CA, bool, error) {
	cert, key := filepath.Join(dir, file+".pem"), filepath.Join(dir, file+"-key.pem")
	ca, err := tlsx.LoadCA(cert, key)
	if err == nil {
		return ca, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("the CA in %s: %w", dir, err)
	}
	if ca, err = tlsx.NewCA(name, validity); err != nil {
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
