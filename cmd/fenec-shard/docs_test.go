package main

import (
	"flag"
	"io"
	"testing"

	"github.com/fenec-go/fenec/internal/docscheck"
	"github.com/fenec-go/fenec/internal/logx"
	"github.com/fenec-go/fenec/region"
)

// TestFlagsInReference: every flag of fenec-shard is in docs/http.md's table
// of them.
func TestFlagsInReference(t *testing.T) {
	sec, err := docscheck.Section("../../docs/http.md", "Flags of fenec-shard")
	if err != nil {
		t.Fatal(err)
	}
	o := options{router: region.DefaultConfig(), log: logx.Default()}
	fs := flagSet(&o, io.Discard)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n < 20 {
		t.Fatalf("fenec-shard has %d flags: the flag set is not the binary's", n)
	}
	if miss := docscheck.Missing(sec, fs); len(miss) > 0 {
		t.Fatalf("docs/http.md does not list these flags of fenec-shard: %v", miss)
	}
}
