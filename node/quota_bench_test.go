package node

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fenec-go/fenec/engine"
)

// BenchmarkQuotaPut is one put of one document into a tenant's engine
// through the node's own quota hook (tenant.checkQuota), with no quota,
// held to bytes and rows, and with a bytes-a-second bucket besides; and,
// as the floor, with no hook at all. The four files take their puts in
// turns of putTurn within one run, so a noisy moment falls on all of them;
// each one's median time per put over its turns is reported as its own
// metric (ns/put-<name>): a turn the scheduler preempted does not move it.
// make quota-bench runs it and prints the figures beside the HTTP ones.
func BenchmarkQuotaPut(b *testing.B) {
	const putTurn = 32
	huge := int64(1) << 50
	variants := []struct {
		name  string
		quota *Quota // nil: the tenant has none
		hook  bool
	}{
		{"nohook", nil, false},
		{"none", nil, true},
		{"bytes_rows", &Quota{Bytes: huge, Rows: huge}, true},
		{"bytes_rows_bps", &Quota{Bytes: huge, Rows: huge, BytesPerS: 1e15}, true},
	}
	reg := &registry{}
	dbs := make([]*engine.DB, len(variants))
	for i, v := range variants {
		tn := newTenant(reg, v.name)
		if v.quota != nil {
			tn.quota.Store(v.quota)
		}
		opts := engine.Options{Sync: engine.SyncOff, NoSweep: true}
		if v.hook {
			opts.Quota = tn.checkQuota
		}
		db, err := engine.Create(filepath.Join(b.TempDir(), v.name+fileExt), opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		if _, _, err := db.Exec(context.Background(), engine.Statement{Query: "create collection c (name text, n int)"}); err != nil {
			b.Fatal(err)
		}
		dbs[i] = db
	}
	ctx := context.Background()
	put := func(db *engine.DB, n int) {
		st := engine.Statement{Query: "put c {name: $1, n: $2}", Params: []any{"a row", float64(n)}}
		if _, _, err := db.Exec(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
	for i := range dbs { // warm-up: the statement cache, the first blocks
		for n := range putTurn {
			put(dbs[i], n)
		}
	}
	turns := make([][]time.Duration, len(dbs))
	b.ResetTimer()
	for done := 0; done < b.N; done += putTurn {
		for k := range dbs {
			i := (k + done/putTurn) % len(dbs) // the order turns too
			start := time.Now()
			for n := range putTurn {
				put(dbs[i], done+n)
			}
			turns[i] = append(turns[i], time.Since(start))
		}
	}
	b.StopTimer()
	for i, v := range variants {
		slices.Sort(turns[i])
		b.ReportMetric(float64(turns[i][len(turns[i])/2].Nanoseconds())/putTurn, fmt.Sprintf("ns/put-%s", v.name))
	}
	b.ReportMetric(0, "ns/op")
}
