package testkit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/tlsx"
)

// PKI is a test's certificate authority and the files of the
// certificates it issued, in a temp dir of the test.
type PKI struct {
	tb  testing.TB
	Dir string
	CA  *tlsx.CA
}

// NewPKI makes a CA named name and writes its bundle to Dir/ca.pem, Dir
// a temp dir of the test.
func NewPKI(tb testing.TB, name string) *PKI {
	tb.Helper()
	return NewPKIAt(tb, name, tb.TempDir())
}

// NewPKIAt is NewPKI with its files in dir (made if missing).
func NewPKIAt(tb testing.TB, name, dir string) *PKI {
	tb.Helper()
	ca, err := tlsx.NewCA(name, 24*time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	p := &PKI{tb: tb, Dir: dir, CA: ca}
	if err := tlsx.WriteFile(p.Bundle(), ca.PEM, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Bundle is the path of the CA's certificate, the bundle peers verify
// against.
func (p *PKI) Bundle() string { return filepath.Join(p.Dir, "ca.pem") }

// Issue writes a certificate for name valid for hosts (127.0.0.1 when
// none) and returns its files, with this CA's bundle.
func (p *PKI) Issue(name string, hosts ...string) tlsx.Files {
	p.tb.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	f := tlsx.Files{
		Cert: filepath.Join(p.Dir, name+".pem"),
		Key:  filepath.Join(p.Dir, name+"-key.pem"),
		CA:   p.Bundle(),
	}
	p.Reissue(f, name, hosts...)
	return f
}

// Reissue writes a new certificate for name over f's files (a rotation).
func (p *PKI) Reissue(f tlsx.Files, name string, hosts ...string) *tlsx.Leaf {
	p.tb.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	l, err := p.CA.Issue(name, hosts, time.Hour)
	if err != nil {
		p.tb.Fatal(err)
	}
	if err := l.Write(f.Cert, f.Key); err != nil {
		p.tb.Fatal(err)
	}
	return l
}

// Source loads f, failing the test on an error.
func Source(tb testing.TB, f tlsx.Files) *tlsx.Source {
	tb.Helper()
	s, err := tlsx.Load(f, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
