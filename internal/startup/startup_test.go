package startup

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		done       bool
		out, err   string
		listenWant string
	}{
		{args: nil, listenWant: ":1"},
		{args: []string{"-listen", ":2"}, listenWant: ":2"},
		{args: []string{"-version"}, code: 0, done: true, out: "fenec-x"},
		{args: []string{"-h"}, code: 0, done: true, err: "-listen"},
		{args: []string{"-nosuch"}, code: 2, done: true, err: "nosuch"},
		{args: []string{"-listen"}, code: 2, done: true, err: "needs an argument"},
		{args: []string{"stray", "more"}, code: 2, done: true, err: "fenec-x: unexpected arguments: [stray more]"},
	} {
		var stdout, stderr bytes.Buffer
		fs := flag.NewFlagSet("fenec-x", flag.ContinueOnError)
		fs.SetOutput(&stderr)
		listen := fs.String("listen", ":1", "where")
		var version bool
		fs.BoolVar(&version, "version", false, "print the version")
		code, done := Parse(fs, tc.args, &version, &stdout, &stderr)
		switch {
		case code != tc.code || done != tc.done:
			t.Errorf("%q: code %d done %v, want %d %v", tc.args, code, done, tc.code, tc.done)
		case !strings.Contains(stdout.String(), tc.out) || tc.out == "" && stdout.Len() > 0:
			t.Errorf("%q: stdout %q, want %q", tc.args, stdout.String(), tc.out)
		case !strings.Contains(stderr.String(), tc.err) || tc.err == "" && stderr.Len() > 0:
			t.Errorf("%q: stderr %q, want %q", tc.args, stderr.String(), tc.err)
		case !done && *listen != tc.listenWant:
			t.Errorf("%q: -listen %q, want %q", tc.args, *listen, tc.listenWant)
		}
	}
}
