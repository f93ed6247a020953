package wire_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/fenec-go/fenec/internal/testkit/testnode"
	"github.com/fenec-go/fenec/wire"
)

// DeleteFrozen deletes a file only while it is frozen (a 412 *Error
// otherwise), and IsDamaged tells a damaged file's refusal from any other,
// against a real node.
func TestDeleteFrozenAndIsDamaged(t *testing.T) {
	ctx := testnode.Ctx(t)
	n := testnode.Start(t, testnode.Options{Configure: withSync})
	ac := n.Admin()
	if err := ac.Create(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	query(t, n, "t", "create collection c (n int)")
	query(t, n, "t", "put c [{n: 1}, {n: 2}, {n: 3}]")
	if _, err := ac.DeleteFrozen(ctx, "t"); wire.StatusOf(err) != http.StatusPreconditionFailed || wire.IsDamaged(err) {
		t.Fatalf("delete a file not frozen: %v", err)
	}
	if st, err := ac.Replication(ctx, "t"); err != nil || st.Frozen {
		t.Fatalf("replication of a file not frozen: %+v, %v", st, err)
	}
	if _, err := ac.Freeze(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if st, err := ac.Replication(ctx, "t"); err != nil || !st.Frozen {
		t.Fatalf("replication of a frozen file: %+v, %v", st, err)
	}
	if gone, err := ac.DeleteFrozen(ctx, "t"); err != nil || !gone {
		t.Fatalf("delete a frozen file: %v, %v", gone, err)
	}
	if gone, err := ac.DeleteFrozen(ctx, "t"); err != nil || gone {
		t.Fatalf("delete it again: %v, %v", gone, err)
	}

	if err := ac.Create(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	query(t, n, "d", "create collection c (n int)")
	query(t, n, "d", "put c [{n: 1}, {n: 2}, {n: 3}]")
	n.Stop()
	path := filepath.Join(n.Config().Dir, "d.fenec")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n.Start()
	if _, err := ac.Replication(ctx, "d"); !wire.IsDamaged(err) {
		t.Fatalf("a damaged file's replication: %v", err)
	}
	if _, err := ac.Replication(ctx, "nobody"); err == nil || wire.IsDamaged(err) {
		t.Fatalf("an unknown tenant's replication: %v", err)
	}
	if wire.IsDamaged(errors.New(`{"damaged": true}`)) || wire.IsDamaged(nil) {
		t.Fatal("an error that is no node's answer counted damaged")
	}
}
