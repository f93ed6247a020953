package global

import (
	"errors"
	"testing"
	"time"
)

func newTestStore(t testing.TB, d Directory) *Store {
	t.Helper()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return NewStore(d, WithClock(func() time.Time { return clock }))
}

// seed records two nodes and returns their revisions.
func seedNodes(t testing.TB, s *Store) map[string]int64 {
	t.Helper()
	ctx := testCtx(t)
	revs := map[string]int64{}
	for _, n := range []string{"n1", "n2", "n3"} {
		rev, err := s.Txn().PutNode(n, 0, Node{Addr: "http://" + n, Token: "tok-" + n, Region: "eu", Lease: true}).Commit(ctx)
		if err != nil {
			t.Fatalf("put node %s: %v", n, err)
		}
		revs[n] = rev
	}
	return revs
}

func TestStore(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s *Store)
	}{
		{"Records", testStoreRecords},
		{"Validation", testStoreValidation},
		{"Place", testStorePlace},
		{"Failover", testStoreFailover},
		{"Move", testStoreMove},
		{"Hold", testStoreHold},
		{"HoldAndFailoverMany", testStoreHoldAndFailoverMany},
		{"Remove", testStoreRemove},
		{"Fence", testStoreFence},
		{"ClaimLeader", testClaimLeader},
		{"Promote", testPromote},
		{"LeaseRecord", testLeaseRecord},
		{"Handoff", testHandoff},
		{"HandoffRace", testHandoffRace},
		{"ClaimName", testClaimName},
		{"Guarded", testGuarded},
		{"Standby", testStoreStandby},
	}
	forEachDirectory(t, func(t *testing.T, open func(testing.TB) Directory) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { c.fn(t, newTestStore(t, open(t))) })
		}
	})
}

func testStoreRecords(t *testing.T, s *Store) {
	ctx := testCtx(t)
	if term, err := s.Term(ctx); err != nil || term.Rev != 0 || term.Value != 0 {
		t.Fatalf("term before any: %+v, %v", term, err)
	}
	if _, err := s.GetTenant(ctx, "t1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent tenant: err %v, want ErrNotFound", err)
	}
	region := Region{Name: "eu", Leaser: LeaserRegion, Handoff: &Handoff{
		From: LeaserGlobal, To: LeaserRegion, State: HandoffDone, Term: 3, LeaseRecordMS: 2000,
		LastGrant: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), At: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)}}
	quota := Quota{Bytes: 1 << 30, Rows: 1000, Streams: 5, Requests: 50, RowsPerS: 100, BytesPerS: 1 << 20}
	rev, err := s.Txn().PutRegion(0, region).PutQuota("t1", 0, quota).PutLeaseRecord(0, 1500).Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotR, err := s.GetRegion(ctx, "eu")
	if err != nil || gotR.Rev != rev || *gotR.Value.Handoff != *region.Handoff || gotR.Value.Leaser != LeaserRegion {
		t.Fatalf("region: got %+v at %d, err %v; want %+v at %d", gotR.Value, gotR.Rev, err, region, rev)
	}
	if gotQ, err := s.GetQuota(ctx, "t1"); err != nil || gotQ.Value != quota || gotQ.Rev != rev {
		t.Fatalf("quota: got %+v, %v", gotQ, err)
	}
	if lr, err := s.LeaseRecord(ctx); err != nil || lr.Value != 1500 || lr.Rev != rev {
		t.Fatalf("lease record: got %+v, %v", lr, err)
	}
	revs := seedNodes(t, s)
	nodes, listRev, err := s.ListNodes(ctx)
	if err != nil || len(nodes) != 3 || listRev < revs["n3"] {
		t.Fatalf("list nodes: %v at %d, err %v", nodes, listRev, err)
	}
	if n := nodes["n2"]; n.Rev != revs["n2"] || n.Value.Addr != "http://n2" || n.Value.Token != "tok-n2" || !n.Value.Lease {
		t.Fatalf("node n2: %+v", n)
	}
	// The raw JSON uses the layout's field names.
	kv, err := s.Directory().Get(ctx, QuotaKey("t1"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bytes":1073741824,"rows":1000,"streams":5,"requests":50,"rows_per_s":100,"bytes_per_s":1048576}`
	if string(kv.Value) != want {
		t.Fatalf("quota stored as %s, want %s", kv.Value, want)
	}
}

// testStoreStandby: a node's standby is written, read back, replaced only
// at the revision read, and removed; its raw value is the standby's name as
// a JSON string.
func testStoreStandby(t *testing.T, s *Store) {
	ctx := testCtx(t)
	if _, err := s.GetStandby(ctx, "n1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent standby: err %v, want ErrNotFound", err)
	}
	rev, err := s.Txn().PutStandby("n1", 0, "n2").Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetStandby(ctx, "n1"); err != nil || got.Value != "n2" || got.Rev != rev {
		t.Fatalf("standby: got %+v, %v; want n2 at %d", got, err, rev)
	}
	kv, err := s.Directory().Get(ctx, StandbyKey("n1"))
	if err != nil || string(kv.Value) != `"n2"` || kv.Key != "standbys/n1" {
		t.Fatalf("standby stored as %s = %s, %v; want standbys/n1 = \"n2\"", kv.Key, kv.Value, err)
	}
	if _, err := s.Txn().PutStandby("n1", 0, "n3").Commit(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("put at a stale revision: err %v, want ErrConflict", err)
	}
	for _, tc := range []struct{ node, standby string }{{"N1", "n2"}, {"n1", "n/2"}, {"n1", ""}} {
		if _, err := s.Txn().PutStandby(tc.node, rev, tc.standby).Commit(ctx); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("put standby %q of %q: err %v, want ErrInvalidName", tc.standby, tc.node, err)
		}
	}
	if _, err := s.GetStandby(ctx, "n/1"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("get standby of n/1: err %v, want ErrInvalidName", err)
	}
	if _, err := s.Txn().DeleteStandby("n1", rev).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetStandby(ctx, "n1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted standby: err %v, want ErrNotFound", err)
	}
}

func testStoreValidation(t *testing.T, s *Store) {
	ctx := testCtx(t)
	bad := []struct {
		name string
		tx   *Txn
		want error
	}{
		{"tenant name", s.Txn().PutTenant("Bad Name", 0, Tenant{Node: "n1", State: StateActive}), ErrInvalidName},
		{"long name", s.Txn().PutNode(string(make([]byte, 65)), 0, Node{Addr: "a", Region: "eu"}), ErrInvalidName},
		{"state", s.Txn().PutTenant("t", 0, Tenant{Node: "n1", State: "lost"}), ErrInvalidRecord},
		{"moving without target", s.Txn().PutTenant("t", 0, Tenant{Node: "n1", State: StateMoving}), ErrInvalidName},
		{"replica on primary", s.Txn().PutTenant("t", 0, Tenant{Node: "n1", State: StateActive, Replica: "n1"}), ErrInvalidRecord},
		{"leaser", s.Txn().PutRegion(0, Region{Name: "eu", Leaser: "both"}), ErrInvalidRecord},
		{"node addr", s.Txn().PutNode("n1", 0, Node{Region: "eu"}), ErrInvalidRecord},
		{"quota", s.Txn().PutQuota("t", 0, Quota{Rows: -1}), ErrInvalidRecord},
		{"leader term", s.Txn().PutLeader(0, Leader{Router: "r1"}), ErrInvalidRecord},
	}
	for _, c := range bad {
		if _, err := c.tx.Commit(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	// A refused transaction wrote nothing, not even its valid parts.
	if _, err := s.Txn().PutNode("n9", 0, Node{Addr: "a", Region: "eu"}).PutTenant("BAD", 0, Tenant{}).Commit(ctx); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("mixed txn: %v", err)
	}
	if _, err := s.GetNode(ctx, "n9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("node of a refused txn: err %v, want ErrNotFound", err)
	}
	for _, name := range []string{"a", "a-b_c9", string(make64('z'))} {
		if !ValidName(name) {
			t.Errorf("ValidName(%q) = false", name)
		}
	}
	for _, name := range []string{"", "A", "a/b", "a.b", "a b", string(make64('z')) + "z"} {
		if ValidName(name) {
			t.Errorf("ValidName(%q) = true", name)
		}
	}
}

func make64(c byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return b
}

func placeT1(t testing.TB, s *Store) Versioned[Tenant] {
	t.Helper()
	revs := seedNodes(t, s)
	v, err := s.PlaceTenant(testCtx(t), "t1", Tenant{Node: "n1", State: StateActive, Replica: "n2", Lineage: 77}, revs["n1"])
	if err != nil {
		t.Fatalf("place: %v", err)
	}
	return v
}

func testStorePlace(t *testing.T, s *Store) {
	ctx := testCtx(t)
	revs := seedNodes(t, s)
	v, err := s.PlaceTenant(ctx, "t1", Tenant{Node: "n1", State: StateActive, Lineage: 5}, revs["n1"])
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTenant(ctx, "t1")
	if err != nil || got != v {
		t.Fatalf("placed %+v, read %+v (%v)", v, got, err)
	}
	if _, err := s.PlaceTenant(ctx, "t1", Tenant{Node: "n2", State: StateActive}, revs["n2"]); !errors.Is(err, ErrConflict) {
		t.Fatalf("place an existing tenant: err %v, want ErrConflict", err)
	}
	// The node changed since it was read: placing on it conflicts.
	if _, err := s.Txn().PutNode("n2", revs["n2"], Node{Addr: "http://n2b", Region: "eu"}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PlaceTenant(ctx, "t2", Tenant{Node: "n2", State: StateActive}, revs["n2"]); !errors.Is(err, ErrConflict) {
		t.Fatalf("place on a node changed since read: err %v, want ErrConflict", err)
	}
	if _, err := s.GetTenant(ctx, "t2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("t2 written by a conflicting place: %v", err)
	}
}

func testStoreFailover(t *testing.T, s *Store) {
	ctx := testCtx(t)
	v := placeT1(t, s)
	got, err := s.Failover(ctx, "t1", v, "n2", 991)
	if err != nil {
		t.Fatal(err)
	}
	want := Tenant{Node: "n2", State: StateActive, Lineage: 77, ForkedHistory: 991, FailedFrom: "n1"}
	if got.Value != want || got.Rev <= v.Rev {
		t.Fatalf("after failover %+v at %d, want %+v after %d", got.Value, got.Rev, want, v.Rev)
	}
	if read, _ := s.GetTenant(ctx, "t1"); read != got {
		t.Fatalf("read %+v, want %+v", read, got)
	}
	// A second router acting on the stale reading conflicts and changes nothing.
	if _, err := s.Failover(ctx, "t1", v, "n3", 992); !errors.Is(err, ErrConflict) {
		t.Fatalf("failover from a stale revision: err %v, want ErrConflict", err)
	}
	if read, _ := s.GetTenant(ctx, "t1"); read != got {
		t.Fatalf("after a stale failover read %+v, want %+v", read, got)
	}
	if _, err := s.Failover(ctx, "t1", got, "n2", 993); !errors.Is(err, ErrState) {
		t.Fatalf("failover onto its own node: err %v, want ErrState", err)
	}
	// The change carries a failover as such: FailedOver names n1.
	c := TenantChange{Name: "t1", Old: &v.Value, New: &got.Value}
	if from, ok := c.FailedOver(); !ok || from != "n1" {
		t.Fatalf("FailedOver() = %q, %v; want n1, true", from, ok)
	}
}

func testStoreMove(t *testing.T, s *Store) {
	ctx := testCtx(t)
	v := placeT1(t, s)
	moving, err := s.BeginMove(ctx, "t1", v, "n3")
	if err != nil {
		t.Fatal(err)
	}
	if moving.Value.State != StateMoving || moving.Value.Target != "n3" || moving.Value.HeldBy != HoldMove || moving.Value.Node != "n1" {
		t.Fatalf("moving: %+v", moving.Value)
	}
	if _, err := s.BeginMove(ctx, "t1", moving, "n2"); !errors.Is(err, ErrHeld) {
		t.Fatalf("second move: err %v, want ErrHeld", err)
	}
	if _, err := s.Failover(ctx, "t1", moving, "n2", 5); !errors.Is(err, ErrHeld) {
		t.Fatalf("failover during a move: err %v, want ErrHeld", err)
	}
	if _, err := s.FinishMove(ctx, "t1", v); !errors.Is(err, ErrState) {
		// v is both stale and not moving; the state check comes first.
		t.Fatalf("finish from the pre-move reading: err %v, want ErrState", err)
	}
	done, err := s.FinishMove(ctx, "t1", moving)
	if err != nil {
		t.Fatal(err)
	}
	want := Tenant{Node: "n3", State: StateActive, Replica: "n2", Lineage: 77}
	if done.Value != want {
		t.Fatalf("after move %+v, want %+v", done.Value, want)
	}
	if _, ok := (TenantChange{Old: &v.Value, New: &done.Value}).FailedOver(); ok {
		t.Fatal("a move reported as a failover")
	}
	if _, err := s.FinishMove(ctx, "t1", moving); !errors.Is(err, ErrConflict) {
		t.Fatalf("finish twice: err %v, want ErrConflict", err)
	}
	moving, err = s.BeginMove(ctx, "t1", done, "n1")
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.AbortMove(ctx, "t1", moving)
	if err != nil || back.Value != want {
		t.Fatalf("abort: %+v, %v; want %+v", back.Value, err, want)
	}
	// A move onto the replica's node drops the replica as it begins: put
	// back, the tenant names no copy the move replaced.
	moving, err = s.BeginMove(ctx, "t1", back, "n2")
	if err != nil || moving.Value.Replica != "" {
		t.Fatalf("move onto the replica's node: %+v, %v", moving.Value, err)
	}
	back, err = s.AbortMove(ctx, "t1", moving)
	if want.Replica = ""; err != nil || back.Value != want {
		t.Fatalf("abort of a move onto the replica's node: %+v, %v; want %+v", back.Value, err, want)
	}

	// A move by following records its steps; put back, none is left.
	if _, err := s.StepMove(ctx, "t1", back, MoveFollowing, 0); !errors.Is(err, ErrState) {
		t.Fatalf("a step of no move: err %v, want ErrState", err)
	}
	moving, err = s.BeginMove(ctx, "t1", back, "n2")
	if err != nil {
		t.Fatal(err)
	}
	stepped, err := s.StepMove(ctx, "t1", moving, MovePromoting, 41)
	if err != nil || stepped.Value.MoveStep != MovePromoting || stepped.Value.MoveSeq != 41 {
		t.Fatalf("step: %+v, %v", stepped.Value, err)
	}
	if _, err := s.StepMove(ctx, "t1", moving, MoveSwitching, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("a step from a stale reading: err %v, want ErrConflict", err)
	}
	if back, err = s.AbortMove(ctx, "t1", stepped); err != nil || back.Value != want {
		t.Fatalf("abort after a step: %+v, %v; want %+v", back.Value, err, want)
	}
	// Finished from a promoted copy, the fork is recorded and the steps go.
	moving, _ = s.BeginMove(ctx, "t1", back, "n2")
	stepped, _ = s.StepMove(ctx, "t1", moving, MovePromoting, 41)
	done, err = s.FinishMoveForked(ctx, "t1", stepped, 9)
	want.Node, want.ForkedHistory = "n2", 9
	if err != nil || done.Value != want {
		t.Fatalf("finish from a promoted copy: %+v, %v; want %+v", done.Value, err, want)
	}
}

func testStoreHold(t *testing.T, s *Store) {
	ctx := testCtx(t)
	v := placeT1(t, s)
	held, err := s.Hold(ctx, "t1", v, "quota")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold(ctx, "t1", held, "other"); !errors.Is(err, ErrHeld) {
		t.Fatalf("double hold: err %v, want ErrHeld", err)
	}
	if _, err := s.Release(ctx, "t1", held, "other"); !errors.Is(err, ErrState) {
		t.Fatalf("release by another: err %v, want ErrState", err)
	}
	free, err := s.Release(ctx, "t1", held, "quota")
	if err != nil || free.Value.HeldBy != "" {
		t.Fatalf("release: %+v, %v", free, err)
	}
	if _, err := s.Failover(ctx, "t1", free, "n2", 9); err != nil {
		t.Fatalf("failover once released: %v", err)
	}
}

// Many tenants held, and released and failed over, each in one
// transaction; any refusal or stale reading writes none of them.
func testStoreHoldAndFailoverMany(t *testing.T, s *Store) {
	ctx := testCtx(t)
	revs := seedNodes(t, s)
	names := []string{"t1", "t2", "t3"}
	at := map[string]Versioned[Tenant]{}
	for i, n := range names {
		v, err := s.PlaceTenant(ctx, n, Tenant{Node: "n1", State: StateActive, Replica: "n2", Lineage: uint64(10 + i)}, revs["n1"])
		if err != nil {
			t.Fatal(err)
		}
		at[n] = v
	}
	// A stale reading of one refuses them all.
	tx := s.Txn()
	for _, n := range names {
		v := at[n]
		if n == "t2" {
			v.Rev--
		}
		tx, _ = tx.HoldTenant(n, v, "failover")
	}
	if _, err := tx.Commit(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("hold with a stale reading: %v, want ErrConflict", err)
	}
	for _, n := range names {
		if got, _ := s.GetTenant(ctx, n); got.Value.HeldBy != "" {
			t.Fatalf("%s held by a refused transaction", n)
		}
	}
	tx = s.Txn()
	want := map[string]Tenant{}
	for _, n := range names {
		var rec Tenant
		tx, rec = tx.HoldTenant(n, at[n], "failover")
		want[n] = rec
	}
	rev, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		got, err := s.GetTenant(ctx, n)
		if err != nil || got.Rev != rev || got.Value != want[n] || got.Value.HeldBy != "failover" {
			t.Fatalf("%s held: %+v at %d, %v; want %+v at %d", n, got.Value, got.Rev, err, want[n], rev)
		}
		at[n] = got
	}
	// Held already: another hold is refused before anything is sent.
	tx, _ = s.Txn().HoldTenant("t1", at["t1"], "quota")
	if _, err := tx.Commit(ctx); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second hold: %v, want ErrHeld", err)
	}
	// Released by another operation: refused whole.
	tx = s.Txn()
	tx, _ = tx.ReleaseAndFailover("t1", at["t1"], "failover", "n2", 5)
	tx, _ = tx.ReleaseAndFailover("t2", at["t2"], "move", "n2", 5)
	if _, err := tx.Commit(ctx); !errors.Is(err, ErrState) {
		t.Fatalf("release by the wrong holder: %v, want ErrState", err)
	}
	if got, _ := s.GetTenant(ctx, "t1"); got.Rev != at["t1"].Rev {
		t.Fatal("t1 written by a refused transaction")
	}
	tx = s.Txn()
	for i, n := range names {
		tx, want[n] = tx.ReleaseAndFailover(n, at[n], "failover", "n2", uint64(100+i))
	}
	if rev, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		got, err := s.GetTenant(ctx, n)
		w := Tenant{Node: "n2", FailedFrom: "n1", State: StateActive, Lineage: uint64(10 + i), ForkedHistory: uint64(100 + i)}
		if err != nil || got.Rev != rev || got.Value != w || want[n] != w {
			t.Fatalf("%s failed over: %+v at %d (built %+v), %v; want %+v at %d", n, got.Value, got.Rev, want[n], err, w, rev)
		}
	}
}

func testStoreRemove(t *testing.T, s *Store) {
	ctx := testCtx(t)
	v := placeT1(t, s)
	qrev, err := s.Txn().PutQuota("t1", 0, Quota{Rows: 10}).Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveTenant(ctx, "t1", v, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("remove with the quota read as absent: err %v, want ErrConflict", err)
	}
	if err := s.RemoveTenant(ctx, "t1", v, qrev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTenant(ctx, "t1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tenant after remove: %v", err)
	}
	if _, err := s.GetQuota(ctx, "t1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("quota after remove: %v", err)
	}
}

func testStoreFence(t *testing.T, s *Store) {
	ctx := testCtx(t)
	term, err := s.Promote(ctx, "r1")
	if err != nil || term != 1 {
		t.Fatalf("promote: %d, %v", term, err)
	}
	fenced, read, err := s.Fence(ctx)
	if err != nil || read.Value != 1 {
		t.Fatalf("fence: term %d, %v", read.Value, err)
	}
	v := placeT1(t, fenced)
	if _, err := fenced.Failover(ctx, "t1", v, "n2", 1); err != nil {
		t.Fatalf("fenced failover at the current term: %v", err)
	}
	if _, err := s.Promote(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	cur, err := s.GetTenant(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fenced.Failover(ctx, "t1", cur, "n3", 2); !errors.Is(err, ErrConflict) {
		t.Fatalf("deposed router's failover: err %v, want ErrConflict", err)
	}
	if _, err := fenced.RaiseLeaseRecord(ctx, 9000); !errors.Is(err, ErrConflict) {
		t.Fatalf("deposed router's lease record: err %v, want ErrConflict", err)
	}
	if rec, _ := s.LeaseRecord(ctx); rec.Value != 0 {
		t.Fatalf("deposed router wrote the lease record: %d", rec.Value)
	}
	// Fenced again on the new term, it writes.
	refenced, read, err := s.Fence(ctx)
	if err != nil || read.Value != 2 {
		t.Fatalf("fence again: term %d, %v", read.Value, err)
	}
	if _, err := refenced.Failover(ctx, "t1", cur, "n3", 2); err != nil {
		t.Fatalf("failover fenced on the current term: %v", err)
	}
}

func testClaimLeader(t *testing.T, s *Store) {
	ctx := testCtx(t)
	l, err := s.ClaimLeader(ctx, "r1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.Value.Router != "r1" || l.Value.Term != 1 || !l.Value.Since.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("leader %+v", l.Value)
	}
	if term, _ := s.Term(ctx); term.Value != 1 {
		t.Fatalf("term after claim: %d, want 1", term.Value)
	}
	again, err := s.ClaimLeader(ctx, "r1", 1)
	if err != nil || again != l {
		t.Fatalf("reclaim by the leader: %+v, %v; want %+v", again, err, l)
	}
	if _, err := s.ClaimLeader(ctx, "r2", 1); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("claim at the leader's term: err %v, want ErrStaleTerm", err)
	}
	if _, err := s.ClaimLeader(ctx, "r2", 2); err != nil {
		t.Fatalf("claim at a term moving on: %v", err)
	}
	if _, err := s.ClaimLeader(ctx, "r1", 1); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("deposed leader's claim: err %v, want ErrStaleTerm", err)
	}
	// Two routers racing for the same term: exactly one wins.
	results := make(chan error, 2)
	for _, r := range []string{"ra", "rb"} {
		go func() {
			_, err := s.ClaimLeader(ctx, r, 3)
			results <- err
		}()
	}
	e1, e2 := <-results, <-results
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("racing claims: %v and %v; want exactly one to win", e1, e2)
	}
	for _, e := range []error{e1, e2} {
		if e != nil && !errors.Is(e, ErrStaleTerm) {
			t.Fatalf("losing claim: %v, want ErrStaleTerm", e)
		}
	}
}

func testPromote(t *testing.T, s *Store) {
	ctx := testCtx(t)
	if _, err := s.ClaimLeader(ctx, "r1", 4); err != nil {
		t.Fatal(err)
	}
	term, err := s.Promote(ctx, "r2")
	if err != nil || term != 5 {
		t.Fatalf("promote: term %d, %v; want 5", term, err)
	}
	l, err := s.Leader(ctx)
	if err != nil || l.Value.Router != "r2" || l.Value.Term != 5 {
		t.Fatalf("leader after promote: %+v, %v", l.Value, err)
	}
	if cur, _ := s.Term(ctx); cur.Value != 5 {
		t.Fatalf("term %d, want 5", cur.Value)
	}
	if _, err := s.ClaimLeader(ctx, "r1", 5); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("old leader claiming the promoted term: %v", err)
	}
}

func testLeaseRecord(t *testing.T, s *Store) {
	ctx := testCtx(t)
	rs := LeaseRecordStore{S: s}
	if d, err := rs.Get(ctx); err != nil || d != 0 {
		t.Fatalf("record before any: %v, %v", d, err)
	}
	if err := rs.Raise(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rs.Raise(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if d, _ := rs.Get(ctx); d != 2*time.Second {
		t.Fatalf("raise to less lowered the record: %v", d)
	}
	if err := rs.Lower(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, _ := rs.Get(ctx); d != 2*time.Second {
		t.Fatalf("lower to more raised the record: %v", d)
	}
	if err := rs.Lower(ctx, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d, _ := rs.Get(ctx); d != 500*time.Millisecond {
		t.Fatalf("record %v, want 500ms", d)
	}
}
