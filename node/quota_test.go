package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/testkit"
)

func TestGateAndQuota(t *testing.T) {
	reg := &registry{maxMemory: 1000}
	tn := &tenant{reg: reg}
	tn.quota.Store(&Quota{Bytes: 100, Rows: 10})
	tests := []struct {
		name  string
		mem   int64
		ask   engine.QuotaAsk
		want  error
		setup func()
	}{
		{"fits", 10, engine.QuotaAsk{RecordBytes: 50, FileBytes: 50, AddRows: 1, Rows: 9}, nil, nil},
		{"bytes", 10, engine.QuotaAsk{RecordBytes: 51, FileBytes: 50}, ErrQuotaBytes, nil},
		{"rows", 10, engine.QuotaAsk{RecordBytes: 1, AddRows: 2, Rows: 9}, ErrQuotaRows, nil},
		{"memory", 1001, engine.QuotaAsk{RecordBytes: 1}, ErrMemoryFull, nil},
		{"rollback passes", 5000, engine.QuotaAsk{RecordBytes: 500, FileBytes: 500, Rollback: true}, nil, nil},
	}
	for _, tt := range tests {
		tn.mem.Store(tt.mem)
		if err := tn.checkQuota(tt.ask); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := tn.gate(); err != nil {
		t.Fatalf("open gate: %v", err)
	}
	tn.freeze()
	if err := tn.gate(); !errors.Is(err, ErrFrozen) {
		t.Fatalf("frozen gate: %v", err)
	}
	tn.thaw()
	tn.role.Store(int32(RoleReplica))
	if err := tn.gate(); !errors.Is(err, ErrReplica) {
		t.Fatalf("replica gate: %v", err)
	}
	tn.role.Store(int32(RolePrimary))
	noLease := errors.New("no lease")
	lease := func() error { return noLease }
	tn.leaseGate.Store(&lease)
	if err := tn.gate(); !errors.Is(err, noLease) {
		t.Fatalf("lease gate: %v", err)
	}
	for _, err := range []error{ErrFrozen, ErrReplica, ErrQuotaBytes, ErrMemoryFull} {
		status, _ := statusOf(&engine.GateError{Err: err})
		if qs, _ := statusOf(&engine.QuotaError{Err: err}); status == 0 || qs == 0 {
			t.Fatal("no status")
		}
		want := map[error]int{ErrFrozen: 503, ErrReplica: 503, ErrQuotaBytes: 507, ErrMemoryFull: 507}[err]
		if status != want {
			t.Errorf("status of %v: %d, want %d", err, status, want)
		}
	}
}

func TestQuotaRoutes(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, func(c *Config) { c.Dir = dir })
	people(t, n)
	if r := n.admin("PUT", "tenants/a/quota", `{"rows": 4, "streams": 1}`); r.Status != 200 {
		t.Fatalf("put quota: %d %s", r.Status, r.Body)
	}
	if r := n.admin("GET", "tenants/a/quota", ""); strings.TrimSpace(string(r.Body)) != `{"rows":4,"streams":1}` {
		t.Fatalf("get quota: %d %s", r.Status, r.Body)
	}
	u := n.admin("GET", "tenants/a/usage", "").Obj(t)
	if u["rows"] != json.Number("3") || u["bytes"] != json.Number(itoa(fileSize(t, n, "a"))) {
		t.Fatalf("usage %v", u)
	}
	// Rows: the block that would pass the quota is refused whole.
	seq := seqOf(t, n, "a")
	wantJSONError(t, n.do("POST", "/t/a/c", `[{"name":"d"},{"name":"e"}]`), 507)
	if seqOf(t, n, "a") != seq {
		t.Fatal("a refused block landed")
	}
	if r := n.do("POST", "/t/a/c", `{"name":"d"}`); r.Status != 201 {
		t.Fatalf("insert within quota: %d %s", r.Status, r.Body)
	}
	// Deletes go through a full tenant.
	if r := n.do("DELETE", "/t/a/c?name=eq.d", ""); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	// Streams.
	n.subscribe("/t/a/c/changes").mustNext(t, "seed")
	wantJSONError(t, n.do("GET", "/t/a/c/changes", ""), 429)
	// Bad quotas.
	wantJSONError(t, n.admin("PUT", "tenants/a/quota", `{"rows": -1}`), 400)
	wantJSONError(t, n.admin("PUT", "tenants/a/quota", `{"cores": 2}`), 400)
	wantJSONError(t, n.admin("PUT", "tenants/nope/quota", `{}`), 404)
	wantJSONError(t, n.admin("POST", "tenants/a/usage", ""), 405)
	// Kept across a restart; gone with the tenant.
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, func(c *Config) { c.Dir = dir })
	if r := n2.admin("GET", "tenants/a/quota", ""); strings.TrimSpace(string(r.Body)) != `{"rows":4,"streams":1}` {
		t.Fatalf("quota after restart: %s", r.Body)
	}
	wantJSONError(t, n2.do("POST", "/t/a/c", `[{"name":"d"},{"name":"e"}]`), 507)
	if r := n2.admin("DELETE", "tenants/a", ""); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	if _, err := os.Stat(filepath.Join(dir, "a"+quotaExt)); !os.IsNotExist(err) {
		t.Fatalf("quota file outlived its tenant: %v", err)
	}
	n2.mkTenant("a")
	if r := n2.admin("GET", "tenants/a/quota", ""); strings.TrimSpace(string(r.Body)) != `{}` {
		t.Fatalf("a new tenant under the name has quota %s", r.Body)
	}
}

func TestQuotaBytesAndRates(t *testing.T) {
	n := startNode(t, nil)
	people(t, n)
	size := fileSize(t, n, "a")
	n.admin("PUT", "tenants/a/quota", fmt.Sprintf(`{"bytes": %d}`, size+200))
	wantJSONError(t, n.do("POST", "/t/a/c", `{"name":"`+strings.Repeat("x", 400)+`"}`), 507)
	if fileSize(t, n, "a") != size {
		t.Fatal("a block past the bytes quota landed")
	}
	n.admin("PUT", "tenants/a/quota", `{"rows_per_s": 2}`)
	// The bucket holds two rows' worth: a block of five lands and leaves
	// it in debt, which the next write waits out.
	if r := n.do("POST", "/t/a/c", `[{"n":1},{"n":2},{"n":3},{"n":4},{"n":5}]`); r.Status != 201 {
		t.Fatalf("first write: %d %s", r.Status, r.Body)
	}
	r := n.do("POST", "/t/a/c", `{"n":6}`)
	wantJSONError(t, r, 429)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Reads are not charged.
	if r := n.do("GET", "/t/a/c?count", ""); r.Status != 200 {
		t.Fatalf("read: %d", r.Status)
	}
}

func TestQuotaRequests(t *testing.T) {
	n := startNode(t, nil)
	jobsTenant(t, n)
	n.admin("PUT", "tenants/a/quota", `{"requests": 1}`)
	done := make(chan *resp, 1)
	go func() { done <- n.do("POST", "/t/a/query", claim("w"), "Fenec-Wait", "20000") }()
	testkit.Eventually(t, 5*time.Second, func() bool { return heldRequests(n) == 1 }, "the claim is held")
	r := n.do("GET", "/t/a/jobs?count", "")
	wantJSONError(t, r, 429)
	n.admin("PUT", "tenants/a/quota", `{}`)
	n.q("a", `put jobs {task: "t"}`)
	if got := claimed(t, <-done); got != "t" {
		t.Fatalf("claim took %q", got)
	}
}
