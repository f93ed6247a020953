package global

import (
	"fmt"
	"testing"
)

func TestParseEndpoints(t *testing.T) {
	got := ParseEndpoints(" http://a:2379, http://b:2379 ,,")
	if fmt.Sprint(got) != "[http://a:2379 http://b:2379]" {
		t.Fatalf("got %q", got)
	}
}

// Two directories on one cluster under prefixes that share a beginning see
// only their own keys.
func TestEtcdPrefixesApart(t *testing.T) {
	m := sharedMember(t)
	ctx := testCtx(t)
	a, err := m.Open(ctx, "/apart/x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := m.Open(ctx, "/apart/x2/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mustPut(t, a, "k", "a")
	mustPut(t, b, "k", "b")
	for _, d := range []*EtcdDirectory{a, b} {
		kvs, _, err := d.List(ctx, "")
		if err != nil || len(kvs) != 1 || kvs[0].Key != "k" {
			t.Fatalf("%s lists %v (%v), want its own k alone", d.Prefix(), kvs, err)
		}
	}
	if a.Prefix() != "/apart/x/" {
		t.Fatalf("prefix %q, want a trailing slash", a.Prefix())
	}
}
