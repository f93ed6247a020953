package trust

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReloadReadsTheTokenFileAgain: Reload takes the token file's new
// token and refuses the old one; a file emptied or gone keeps the token in
// use and says so.
func TestReloadReadsTheTokenFileAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router-token")
	write := func(tok string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	tr := loaded(t, Config{Token: "one", TokenFile: path})
	with := func(tok string) error { return tr.Authorize(call("192.0.2.1:1", tok), time.Now()) }
	write("two")
	if err := tr.Reload(); err != nil {
		t.Fatal(err)
	}
	if with("two") != nil || !errors.Is(with("one"), ErrUnauthorized) {
		t.Fatal("the file read again: the new token not taken, or the old still taken")
	}
	write("")
	if err := tr.Reload(); err == nil || with("two") != nil {
		t.Fatalf("an empty file: reload err %v, and the token in use must stay", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := tr.Reload(); err == nil || with("two") != nil {
		t.Fatalf("a file gone: reload err %v, and the token in use must stay", err)
	}
}

// TestLoadRefusesUnreadableTLS: a certificate file that is not one stops
// the router's start, naming the router's files or the directory's.
func TestLoadRefusesUnreadableTLS(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{DirectoryGiven: true}
	c.TLS.Cert, c.TLS.Key = bad, bad
	if _, err := Load(c, Deps{}); err == nil {
		t.Fatal("a router started on a certificate that is not one")
	}
	c = Config{DirectoryGiven: true}
	c.Etcd.TLS.Cert, c.Etcd.TLS.Key = bad, bad
	if _, err := Load(c, Deps{}); err == nil {
		t.Fatal("a router started on an etcd certificate that is not one")
	}
}
