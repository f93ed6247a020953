package wire_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/fenec-go/fenec/wire"
)

func TestQuotaValidateAndJSON(t *testing.T) {
	for _, q := range []wire.Quota{{Bytes: -1}, {Rows: -1}, {Streams: -1}, {Requests: -1}, {RowsPerS: -0.5}, {BytesPerS: -1}} {
		if err := q.Validate(); !errors.Is(err, wire.ErrBadQuota) {
			t.Errorf("%+v: %v", q, err)
		}
	}
	if err := (wire.Quota{}).Validate(); err != nil {
		t.Errorf("no limits: %v", err)
	}
	// The names the node, the router and the directory share; zero limits
	// left out.
	b, _ := json.Marshal(wire.Quota{Rows: 4, Streams: 1, RowsPerS: 2.5})
	if string(b) != `{"rows":4,"streams":1,"rows_per_s":2.5}` {
		t.Fatalf("quota as %s", b)
	}
}

func TestBaseURLAndPaths(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7070":          "http://127.0.0.1:7070",
		"http://n1:7070/":         "http://n1:7070",
		"https://n1.example:7070": "https://n1.example:7070",
	} {
		if got := wire.BaseURL(in); got != want {
			t.Errorf("BaseURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := wire.TenantPath("a/b"); got != "/_admin/tenants/a%2Fb" {
		t.Errorf("TenantPath escapes nothing: %q", got)
	}
	if (wire.Replication{}).LineageID() != 0 {
		t.Error("a file with no history has a lineage")
	}
}
