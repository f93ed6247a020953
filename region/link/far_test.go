package link

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// farInLine waits, for less than the link's resync, until the region's
// far records are exactly those the global directory names for eu.
func (l *linkedRegion) farInLine(tb testing.TB, within time.Duration) {
	tb.Helper()
	testkit.Eventually(tb, within, func() error {
		ctx := testCtx(tb)
		kvs, _, err := l.gd.Directory.List(ctx, "")
		if err != nil {
			return err
		}
		want, err := global.PickFar(kvs, "eu")
		if err != nil {
			return err
		}
		have := map[string]string{}
		for _, p := range []string{global.PrefixFarTenants, global.PrefixFarNodes} {
			got, _, err := l.rd.List(ctx, p)
			if err != nil {
				return err
			}
			for _, kv := range got {
				have[kv.Key] = ""
				if strings.HasPrefix(kv.Key, global.PrefixFarTenants) {
					have[kv.Key] = string(kv.Value)
				}
			}
		}
		wantKeys := map[string]string{}
		for k, v := range want {
			wantKeys[k] = ""
			if strings.HasPrefix(k, global.PrefixFarTenants) {
				wantKeys[k] = string(v)
			}
		}
		if !maps.Equal(wantKeys, have) {
			return fmt.Errorf("far records: %s", firstDiff(wantKeys, have))
		}
		return nil
	})
}

// Changes of far tenants in quick succession — each landing while the
// link copies the one before — all reach the region's directory from the
// watches, well within the link's resync.
func TestLinkFarConvergesUnderChanges(t *testing.T) {
	l := startLinkedRegion(t)
	rnd := rand.New(rand.NewPCG(3, 5))
	nodes := []string{"e1", "e2", "u1"}
	for i := range 300 {
		name := fmt.Sprintf("f%d", rnd.IntN(12))
		ten := global.Tenant{Node: []string{"u1", "e1"}[rnd.IntN(2)], State: global.StateActive}
		if c := nodes[rnd.IntN(len(nodes))]; c != ten.Node {
			ten.ReadCopies = global.MakeNodeList(c)
		}
		b, err := json.Marshal(ten)
		if err != nil {
			t.Fatal(err)
		}
		if i%9 == 8 {
			_, err = l.gd.Directory.Delete(testCtx(t), global.TenantKey(name))
		} else {
			_, err = l.gd.Directory.Put(testCtx(t), global.TenantKey(name), b)
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			l.farInLine(t, 10*time.Second)
		}
	}
	l.farInLine(t, 10*time.Second)
	l.inLine(t)
}
