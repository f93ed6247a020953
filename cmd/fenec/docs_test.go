package main

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/fenec-go/fenec/internal/docscheck"
)

// TestCommandsInReference: every command of fenec has its section in
// docs/cli.md, naming each of its flags (the flags every router command
// shares are named once, in "Talking to a router").
func TestCommandsInReference(t *testing.T) {
	const doc = "../../docs/cli.md"
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	common, err := docscheck.Section(doc, "Talking to a router")
	if err != nil {
		t.Fatal(err)
	}
	shared := flag.NewFlagSet("", flag.ContinueOnError)
	addRouterFlags(shared, e)
	if miss := docscheck.Missing(common, shared); len(miss) > 0 {
		t.Fatalf("docs/cli.md's \"Talking to a router\" does not name %v", miss)
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
		sec, err := docscheck.Section(doc, "fenec "+c.name)
		if err != nil {
			t.Errorf("command %s: %v", c.name, err)
			continue
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs, e)
		fs.VisitAll(func(f *flag.Flag) {
			if shared.Lookup(f.Name) != nil {
				return
			}
			if !docscheck.Names(sec, f) {
				t.Errorf("docs/cli.md's section on fenec %s does not name its flag %s", c.name, f.Name)
			}
		})
	}
	if len(names) < 15 || !slices.Contains(names, "backup") {
		t.Fatalf("commands %v: the table is not the CLI's", names)
	}
}
