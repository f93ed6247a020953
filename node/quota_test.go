package node

import (
	"errors"
	"testing"

	"github.com/fenec-go/fenec/engine"
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
	tn.frozen.Store(true)
	if err := tn.gate(); !errors.Is(err, ErrFrozen) {
		t.Fatalf("frozen gate: %v", err)
	}
	tn.frozen.Store(false)
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
