package tokenfile

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		body, want string
		err        error
	}{
		{"s3cret\n", "s3cret", nil},
		{"  s3cret \r\nsecond line\n", "s3cret", nil},
		{"s3cret", "s3cret", nil},
		{"", "", ErrEmpty},
		{"\nlater\n", "", ErrEmpty},
	} {
		got, err := Read(write("t", tc.body))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%q: got %q, %v; want %q, %v", tc.body, got, err, tc.want, tc.err)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Read(write("long", strings.Repeat("x", maxLine+1))); err == nil {
		t.Error("a first line past the bound was read")
	}
}

func TestFlag(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(p, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var tok string
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&tok, "token", "", "")
	Flag(fs, "token", &tok, "the token")
	if err := fs.Parse([]string{"--token", "inline", "--token-file", p}); err != nil || tok != "from-file" {
		t.Fatalf("got %q, %v", tok, err)
	}
	if err := fs.Parse([]string{"--token-file", p + ".none"}); err == nil {
		t.Fatal("a missing file parsed")
	}
}
