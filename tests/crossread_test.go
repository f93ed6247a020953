package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// crossAnswer is POST /_shard/query's answer.
type crossAnswer struct {
	Rows    []map[string]any          `json:"rows"`
	Tenants map[string]map[string]any `json:"tenants"`
}

// A cross-tenant read over five tenants, two of them on a node whose
// packets go nowhere (cut off, nothing closed), is answered within its
// timeout_ms — and, with none given, within the stated default of 10 s,
// not the router's --upstream-timeout of 60 s — with the three healthy
// tenants' rows and the two listed "timed out after … ms".
func TestCrossTenantReadBoundedPerTenant(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	n1 := c.StartNode("n1", cluster.NodeOptions{})
	n2 := c.StartNode("n2", cluster.NodeOptions{})
	r.Register(n1)
	r.Register(n2)
	data := r.Client()
	on := map[string]*cluster.Node{"a": n1, "b": n1, "c": n1, "d": n2, "e": n2}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		r.Place(name, on[name])
		data.MustQuery(name, "create collection kv (k text, v int)")
		data.MustQuery(name, "put kv {k: $1, v: 1}", name)
	}
	read := func(timeoutMS any) (crossAnswer, time.Duration) {
		t.Helper()
		body := map[string]any{"tenants": "*", "query": "get kv order k", "merge": map[string]any{"concat": true}}
		if timeoutMS != nil {
			body["timeout_ms"] = timeoutMS
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		start := time.Now()
		res := r.Client().DoCtx(ctx, "POST", "/_shard/query", body)
		took := time.Since(start)
		wantStatus(t, res, 200, "cross-tenant read")
		var ans crossAnswer
		if err := json.Unmarshal(res.Body, &ans); err != nil {
			t.Fatalf("cross-tenant read: %v: %s", err, res.Body)
		}
		return ans, took
	}
	healthy := func(ans crossAnswer, cut []string) {
		t.Helper()
		var got []string
		for _, row := range ans.Rows {
			got = append(got, row["_tenant"].(string))
		}
		want := "a,b,c,d,e"
		if len(cut) > 0 {
			want = "a,b,c"
		}
		if strings.Join(got, ",") != want {
			t.Fatalf("rows of %v, want %s: %+v", got, want, ans)
		}
		for _, name := range []string{"a", "b", "c"} {
			if e, ok := ans.Tenants[name]["error"]; ok {
				t.Fatalf("healthy tenant %s listed with %v", name, e)
			}
		}
	}
	all, _ := read(nil)
	healthy(all, nil)

	n2.Cut()
	ans, took := read(1500)
	healthy(ans, []string{"d", "e"})
	for _, name := range []string{"d", "e"} {
		if e, _ := ans.Tenants[name]["error"].(string); !strings.HasPrefix(e, "timed out after 1500 ms") {
			t.Fatalf("tenant %s on the cut node listed as %v", name, ans.Tenants[name])
		}
	}
	if took > 10*time.Second {
		t.Fatalf("a read of timeout_ms 1500 over a cut node answered after %v", took)
	}
	ans, took = read(nil)
	healthy(ans, []string{"d", "e"})
	if e, _ := ans.Tenants["d"]["error"].(string); !strings.HasPrefix(e, "timed out after 10000 ms") {
		t.Fatalf("d with the default bound listed as %v", ans.Tenants["d"])
	}
	if took > 30*time.Second {
		t.Fatalf("a read with the default bound over a cut node answered after %v (--upstream-timeout is 60 s)", took)
	}
	t.Logf("answered after %v with the default bound", took)

	n2.Heal()
	all, _ = read(nil)
	healthy(all, nil)
}

// A group across tenants and a group in one tenant holding the same rows
// agree: numbers equal across int and float, lists and objects of them,
// and mixes of both, each one group of two rows in both, whichever
// tenant holds which row.
func TestCrossTenantGroupAgreesWithOneTenant(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	n := c.StartNode("n1", cluster.NodeOptions{})
	r.Register(n)
	data := r.Client()
	ints := "[{k: 1}, {k: [1]}, {k: {a: 1}}, {k: [1, {a: 2.0}]}, {k: {a: [3], b: 4.5}}, {k: 'x'}, {k: null}]"
	floats := "[{k: 1.0}, {k: [1.0]}, {k: {a: 1.0}}, {k: [1.0, {a: 2}]}, {k: {b: 4.5, a: [3.0]}}, {k: 'x'}, {k: null}]"
	for name, rows := range map[string][]string{"one": {ints, floats}, "x": {ints}, "y": {floats}} {
		r.Place(name, n)
		data.MustQuery(name, "create collection c (k json)")
		for _, q := range rows {
			data.MustQuery(name, "put c "+q)
		}
	}
	counts := func(rows []map[string]any, field string) []float64 {
		var out []float64
		for _, row := range rows {
			out = append(out, row[field].(float64))
		}
		return out
	}
	want := "[2 2 2 2 2 2 2]"

	var one []map[string]any
	res := data.MustQuery("one", "get c select k, count(*) as n group k")
	if err := json.Unmarshal(res.Body, &one); err != nil {
		t.Fatalf("one tenant's group: %v: %s", err, res.Body)
	}
	if got := fmt.Sprint(counts(one, "n")); got != want {
		t.Fatalf("one tenant's group counts %s, want %s: %s", got, want, res.Body)
	}
	for _, tenants := range [][]string{{"x", "y"}, {"one"}} {
		res := data.Do("POST", "/_shard/query", map[string]any{"tenants": tenants, "query": "get c select k",
			"merge": map[string]any{"group": []string{"k"}, "count": "n"}})
		wantStatus(t, res, 200, "cross-tenant group")
		var ans crossAnswer
		if err := json.Unmarshal(res.Body, &ans); err != nil {
			t.Fatalf("cross-tenant group: %v: %s", err, res.Body)
		}
		if got := fmt.Sprint(counts(ans.Rows, "n")); got != want {
			t.Fatalf("group over %v: counts %s, want %s: %s", tenants, got, want, res.Body)
		}
		// Decoded, 1 and 1.0 are one float64: the keys read alike.
		for i := range one {
			a, _ := json.Marshal(one[i]["k"])
			b, _ := json.Marshal(ans.Rows[i]["k"])
			if string(a) != string(b) {
				t.Fatalf("group %d over %v: key %s, one tenant's %s", i, tenants, b, a)
			}
		}
	}
}
