package region

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/region/merge"
)

// queryCluster is a router over two nodes with tenants a and c on n1 and
// b on n2, each holding orders (status, total); d is placed with no
// collection, so a read of orders fails there.
func queryCluster(tb testing.TB) *cpRouter {
	tb.Helper()
	r := startCPRouter(tb, nil)
	r.addNode(tb, "n1", startCPNode(tb))
	r.addNode(tb, "n2", startCPNode(tb))
	data := map[string][]string{
		"a": {"{status: 'paid', total: 10}", "{status: 'open', total: 5}", "{status: 'paid', total: 30}"},
		"b": {"{status: 'paid', total: 20}", "{status: 'open', total: 7}"},
		"c": {"{status: 'paid', total: 15}", "{status: 'void', total: 1}"},
	}
	for _, t := range []string{"a", "b", "c", "d"} {
		node := "n1"
		if t == "b" {
			node = "n2"
		}
		r.place(tb, t, node)
		if t == "d" {
			continue
		}
		r.mustQuery(tb, t, "create collection orders (status text, total int)")
		for _, doc := range data[t] {
			r.mustQuery(tb, t, "put orders "+doc)
		}
	}
	return r
}

// queryAns is POST /_shard/query's answer as a test reads it.
type queryAns struct {
	Rows    []map[string]any `json:"rows"`
	Tenants map[string]struct {
		Seq   *uint64 `json:"seq"`
		Rows  *int    `json:"rows"`
		Error string  `json:"error"`
	} `json:"tenants"`
}

// crossRead posts a cross-tenant read and returns its status and answer.
func (r *cpRouter) crossRead(tb testing.TB, req map[string]any) (int, queryAns, []byte) {
	tb.Helper()
	var ans queryAns
	st, b := r.shard(tb, http.MethodPost, "query", req, nil)
	if st == http.StatusOK {
		if err := json.Unmarshal(b, &ans); err != nil {
			tb.Fatalf("decode %s: %v", b, err)
		}
	}
	return st, ans, b
}

// rowsText is rows as compact JSON (fields sorted), for comparing.
func rowsText(tb testing.TB, rows []map[string]any) string {
	tb.Helper()
	b, err := json.Marshal(rows)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestCrossTenantReadCP(t *testing.T) {
	r := queryCluster(t)
	tests := []struct {
		name    string
		tenants any
		query   string
		merge   map[string]any
		want    string
	}{
		{"concat in the order named", []string{"b", "a", "c"}, "get orders select status, total order total", map[string]any{"concat": true},
			`[{"_tenant":"b","status":"open","total":7},{"_tenant":"b","status":"paid","total":20},` +
				`{"_tenant":"a","status":"open","total":5},{"_tenant":"a","status":"paid","total":10},{"_tenant":"a","status":"paid","total":30},` +
				`{"_tenant":"c","status":"void","total":1},{"_tenant":"c","status":"paid","total":15}]`},
		{"order desc limit", []string{"a", "b", "c"}, "get orders select status, total order total desc limit 4",
			map[string]any{"order": []map[string]any{{"field": "total", "desc": true}}, "limit": 4},
			`[{"_tenant":"a","status":"paid","total":30},{"_tenant":"b","status":"paid","total":20},` +
				`{"_tenant":"c","status":"paid","total":15},{"_tenant":"a","status":"paid","total":10}]`},
		{"group", []string{"a", "b", "c"}, "get orders select status, total",
			map[string]any{"group": []string{"status"}, "sum": []string{"total"}, "count": "n", "min": []string{"total"}, "max": []string{"total"}},
			`[{"_tenants":["a","b"],"max":{"total":7},"min":{"total":5},"n":2,"status":"open","sum":{"total":12}},` +
				`{"_tenants":["a","b","c"],"max":{"total":30},"min":{"total":10},"n":4,"status":"paid","sum":{"total":75}},` +
				`{"_tenants":["c"],"max":{"total":1},"min":{"total":1},"n":1,"status":"void","sum":{"total":1}}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, ans, b := r.crossRead(t, map[string]any{"tenants": tc.tenants, "query": tc.query, "merge": tc.merge})
			if st != http.StatusOK {
				t.Fatalf("%d %s", st, b)
			}
			// Rows come back with their fields; only status and total were
			// selected, but a node may add its id: compare those fields.
			if got := rowsText(t, keepFields(ans.Rows, "_tenant", "_tenants", "status", "total", "n", "sum", "min", "max")); got != tc.want {
				t.Fatalf("rows\n got %s\nwant %s", got, tc.want)
			}
			for _, name := range []string{"a", "b", "c"} {
				if e := ans.Tenants[name]; e.Error != "" || e.Seq == nil || *e.Seq == 0 {
					t.Fatalf("%s listed as %+v", name, e)
				}
			}
		})
	}
}

// keepFields drops every field but those named from each row.
func keepFields(rows []map[string]any, names ...string) []map[string]any {
	for _, row := range rows {
		for k := range row {
			keep := false
			for _, n := range names {
				keep = keep || k == n
			}
			if !keep {
				delete(row, k)
			}
		}
	}
	return rows
}

func TestCrossTenantReadFailuresListedCP(t *testing.T) {
	r := queryCluster(t)
	// d has no orders, ghost is not placed, and a count is not rows: each
	// is listed with its error, the others answered.
	st, ans, b := r.crossRead(t, map[string]any{"tenants": []string{"a", "d", "ghost"}, "query": "get orders order total",
		"merge": map[string]any{"concat": true}})
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, b)
	}
	if len(ans.Rows) != 3 || ans.Tenants["a"].Error != "" || ans.Tenants["a"].Seq == nil {
		t.Fatalf("a: %s", b)
	}
	if e := ans.Tenants["d"].Error; e == "" || !strings.Contains(e, "404") {
		t.Fatalf("d listed as %+v (%s)", ans.Tenants["d"], b)
	}
	if e := ans.Tenants["ghost"].Error; !strings.Contains(e, ErrUnknownTenant.Error()) {
		t.Fatalf("ghost listed as %+v", ans.Tenants["ghost"])
	}
	st, ans, b = r.crossRead(t, map[string]any{"tenants": []string{"a", "b"}, "query": "get orders count",
		"merge": map[string]any{"concat": true}})
	if st != http.StatusOK || len(ans.Rows) != 0 || !strings.Contains(ans.Tenants["b"].Error, merge.ErrNotRows.Error()) {
		t.Fatalf("count: %d %s", st, b)
	}
	// The seq a tenant is listed with covers its writes.
	_, seq, _ := r.query(t, "a", "put orders {status: 'late', total: 2}")
	_, ans, b = r.crossRead(t, map[string]any{"tenants": []string{"a"}, "query": "get orders order total",
		"merge": map[string]any{"concat": true}})
	if got := ans.Tenants["a"].Seq; got == nil || fmt.Sprint(*got) != seq || len(ans.Rows) != 4 {
		t.Fatalf("after a write at %s: %s", seq, b)
	}
}

func TestCrossTenantReadAllAndBoundsCP(t *testing.T) {
	r := queryCluster(t)
	st, ans, b := r.crossRead(t, map[string]any{"tenants": "*", "query": "get orders select status, total order total",
		"merge": map[string]any{"group": []string{"_tenant"}, "count": "n"}})
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, b)
	}
	want := `[{"_tenant":"a","_tenants":["a"],"n":3},{"_tenant":"b","_tenants":["b"],"n":2},{"_tenant":"c","_tenants":["c"],"n":2}]`
	if got := rowsText(t, ans.Rows); got != want || len(ans.Tenants) != 4 || ans.Tenants["d"].Error == "" {
		t.Fatalf("every tenant:\n got %s\nwant %s\n%s", got, want, b)
	}

	// Past the bound of merged rows: refused whole, never cut.
	var docs []string
	for i := range merge.MaxRows {
		docs = append(docs, fmt.Sprintf(`{"status": "bulk", "total": %d}`, i))
	}
	if st, _, body := r.data(t, http.MethodPost, "/t/a/orders", "["+strings.Join(docs, ",")+"]", nil); st != http.StatusCreated {
		t.Fatalf("bulk insert: %d %.200s", st, body)
	}
	st, _, b = r.crossRead(t, map[string]any{"tenants": []string{"a", "b"}, "query": "get orders order total",
		"merge": map[string]any{"concat": true}})
	if st != http.StatusBadRequest || !strings.Contains(string(b), merge.ErrTooManyRows.Error()) {
		t.Fatalf("past the bound: %d %.300s", st, b)
	}
	st, ans, b = r.crossRead(t, map[string]any{"tenants": []string{"a", "b"}, "query": "get orders order total limit 3",
		"merge": map[string]any{"order": []map[string]any{{"field": "total"}}, "limit": 3}})
	if st != http.StatusOK || len(ans.Rows) != 3 {
		t.Fatalf("limited: %d %.300s", st, b)
	}

	// Requests the read refuses whole.
	for _, req := range []map[string]any{
		{"tenants": "all", "query": "get orders", "merge": map[string]any{"concat": true}},
		{"tenants": []string{"a", "a"}, "query": "get orders", "merge": map[string]any{"concat": true}},
		{"tenants": []string{"A"}, "query": "get orders", "merge": map[string]any{"concat": true}},
		{"tenants": []string{"a"}, "query": "", "merge": map[string]any{"concat": true}},
		{"tenants": []string{"a"}, "query": "get orders", "merge": map[string]any{}},
		{"tenants": []string{"a"}, "query": "get orders", "merge": map[string]any{"concat": true}, "extra": 1},
	} {
		if st, _, b := r.crossRead(t, req); st != http.StatusBadRequest {
			t.Fatalf("%v: %d %s", req, st, b)
		}
	}
	if st, _ := r.shard(t, http.MethodGet, "query", nil, nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("GET query: %d", st)
	}
}

func TestCrossTenantReadOnStandbyCP(t *testing.T) {
	r := queryCluster(t)
	sb := startCPRouter(t, func(c *Config) {
		c.ID, c.Standby, c.DirectoryURLs = "rb", true, r.rt.DirectoryURLs()
	})
	req := map[string]any{"tenants": []string{"a", "b", "c"}, "query": "get orders select total",
		"merge": map[string]any{"group": []string{}, "sum": []string{"total"}, "count": "n"}}
	testkit.Eventually(t, cpWait, func() error {
		st, ans, b := sb.crossRead(t, req)
		if st != http.StatusOK || len(ans.Rows) != 1 {
			return fmt.Errorf("%d %s", st, b)
		}
		if got := rowsText(t, ans.Rows); got != `[{"_tenants":["a","b","c"],"n":7,"sum":{"total":88}}]` {
			return fmt.Errorf("rows %s", got)
		}
		return nil
	})
}

func TestCrossTenantReadAnswerBoundCP(t *testing.T) {
	r := queryCluster(t)
	r.mustQuery(t, "d", "create collection big (s text)")
	blob := strings.Repeat("x", 1<<20)
	var docs []string
	for range maxTenantAnswer>>20 + 1 {
		docs = append(docs, `{"s": "`+blob+`"}`)
	}
	if st, _, body := r.data(t, http.MethodPost, "/t/d/big", "["+strings.Join(docs, ",")+"]", nil); st != http.StatusCreated {
		t.Fatalf("insert: %d %.200s", st, body)
	}
	r.mustQuery(t, "a", "create collection big (s text)")
	r.mustQuery(t, "a", "put big {s: 'small'}")
	for range 2 { // and again: the router is whole after cutting an answer off
		st, ans, b := r.crossRead(t, map[string]any{"tenants": []string{"a", "d"}, "query": "get big",
			"merge": map[string]any{"concat": true}})
		if st != http.StatusOK || len(ans.Rows) != 1 || ans.Rows[0]["s"] != "small" {
			t.Fatalf("%d %.300s", st, b)
		}
		if e := ans.Tenants["d"].Error; !strings.Contains(e, ErrAnswerTooLarge.Error()) {
			t.Fatalf("d listed as %+v", ans.Tenants["d"])
		}
	}
}

// BenchmarkCrossTenantReadCP times POST /_shard/query over 8 tenants of
// 100 rows on two in-process nodes, against one tenant's read through the
// router.
func BenchmarkCrossTenantReadCP(b *testing.B) {
	r := startCPRouter(b, nil)
	r.addNode(b, "n1", startCPNode(b))
	r.addNode(b, "n2", startCPNode(b))
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		r.place(b, name, fmt.Sprintf("n%d", i%2+1))
		r.mustQuery(b, name, "create collection orders (status text, total int)")
		var docs []string
		for j := range 100 {
			docs = append(docs, fmt.Sprintf(`{"status": "s%d", "total": %d}`, j%5, j))
		}
		if st, _, body := r.data(b, http.MethodPost, "/t/"+name+"/orders", "["+strings.Join(docs, ",")+"]", nil); st != http.StatusCreated {
			b.Fatalf("insert: %d %s", st, body)
		}
	}
	for _, tc := range []struct {
		name  string
		query string
		merge map[string]any
	}{
		{"order-limit-20", "get orders order total desc limit 20", map[string]any{"order": []map[string]any{{"field": "total", "desc": true}}, "limit": 20}},
		{"group", "get orders select status, total", map[string]any{"group": []string{"status"}, "count": "n", "sum": []string{"total"}}},
	} {
		req := map[string]any{"tenants": names, "query": tc.query, "merge": tc.merge}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if st, _, body := r.crossRead(b, req); st != http.StatusOK {
					b.Fatalf("%d %s", st, body)
				}
			}
		})
	}
	b.Run("one-tenant-read", func(b *testing.B) {
		for b.Loop() {
			r.mustQuery(b, "t0", "get orders order total desc limit 20")
		}
	})
}

func TestCrossTenantReadPassesRequestIDCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n := startCPNode(t)
	// A front that notes the X-Request-Id of each tenant's read.
	var mu sync.Mutex
	seen := map[string]string{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/read") {
			mu.Lock()
			seen[req.URL.Path] = req.Header.Get("X-Request-Id")
			mu.Unlock()
		}
		n.Server().ServeHTTP(w, req)
	}))
	t.Cleanup(front.Close)
	if st, b := r.shard(t, http.MethodPut, "nodes/n1", map[string]any{"addr": strings.TrimPrefix(front.URL, "http://"), "token": cpAdminToken, "region": "eu"}, nil); st != http.StatusCreated {
		t.Fatalf("put node: %d %s", st, b)
	}
	for _, tn := range []string{"a", "b"} {
		r.place(t, tn, "n1")
		r.mustQuery(t, tn, "create collection c (x int)")
	}
	_, seq, _ := r.query(t, "b", "put c {x: 1}")
	body, _ := json.Marshal(map[string]any{"tenants": []string{"a", "b"}, "query": "get c", "merge": map[string]any{"concat": true}})
	st, h, b := cpDo(t, http.MethodPost, r.url+"/_shard/query", cpRouterToken, body, map[string]string{"X-Request-Id": "op-read-1"})
	if st != http.StatusOK || h.Get("X-Request-Id") != "op-read-1" {
		t.Fatalf("%d %v %s", st, h, b)
	}
	var ans queryAns
	if err := json.Unmarshal(b, &ans); err != nil {
		t.Fatal(err)
	}
	if got := ans.Tenants["b"].Seq; got == nil || strconv.FormatUint(*got, 10) != seq {
		t.Fatalf("b listed with seq %v, want %s: %s", got, seq, b)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range []string{"/_admin/tenants/a/read", "/_admin/tenants/b/read"} {
		if got := seen[p]; got != "op-read-1" {
			t.Fatalf("%s carried request id %q: %v", p, got, seen)
		}
	}
}

// TestCrossTenantOrderIsTheEnginesCP: an order merge over rows the
// nodes' engines ordered — lists, int and float numbers, text beyond
// ASCII, nulls and missing fields, in one json field — refuses no tenant
// and gives the order the engine gives the same rows in one tenant.
func TestCrossTenantOrderIsTheEnginesCP(t *testing.T) {
	r := startCPRouter(t, nil)
	r.addNode(t, "n1", startCPNode(t))
	r.addNode(t, "n2", startCPNode(t))
	rows := map[string][]string{
		"a": {`{"v": [2]}`, `{"v": [10]}`, `{"v": 10}`, `{"v": "é"}`, `{"v": null}`, `{"v": [1, "x"]}`, `{"v": 2.5}`, `{"v": {"k": 1}}`, `{"v": [10, null]}`},
		"b": {`{"v": [2, 1]}`, `{"v": 3}`, `{"v": "z"}`, `{"v": "Ω"}`, `{"v": false}`, `{"v": []}`, `{"v": 1.5}`, `{}`, `{"v": 9007199254740993}`},
	}
	for _, desc := range []bool{false, true} {
		name := fmt.Sprintf("desc=%v", desc)
		t.Run(name, func(t *testing.T) {
			all := map[bool]string{false: "asc", true: "desc"}[desc]
			tenants := map[string][]string{"a" + all: rows["a"], "b" + all: rows["b"], all: append(slices.Clone(rows["a"]), rows["b"]...)}
			for tn, docs := range tenants {
				r.place(t, tn, map[bool]string{true: "n1", false: "n2"}[tn[0] == 'a'])
				r.mustQuery(t, tn, "create collection c (v json)")
				if st, _, b := r.data(t, http.MethodPost, "/t/"+tn+"/c", "["+strings.Join(docs, ",")+"]", nil); st != http.StatusCreated {
					t.Fatalf("insert into %s: %d %s", tn, st, b)
				}
			}
			q := "get c select v order v"
			if desc {
				q += " desc"
			}
			var want []string
			b := r.mustQuery(t, all, q)
			var one []map[string]any
			if err := json.Unmarshal(b, &one); err != nil {
				t.Fatalf("%s: %s", err, b)
			}
			for _, row := range one {
				want = append(want, fieldText(t, row, "v"))
			}
			st, ans, b := r.crossRead(t, map[string]any{"tenants": []string{"a" + all, "b" + all}, "query": q,
				"merge": map[string]any{"order": []map[string]any{{"field": "v", "desc": desc}}}})
			if st != http.StatusOK {
				t.Fatalf("%d %s", st, b)
			}
			for tn, e := range ans.Tenants {
				if e.Error != "" {
					t.Fatalf("%s refused: %s", tn, e.Error)
				}
			}
			var got []string
			for _, row := range ans.Rows {
				got = append(got, fieldText(t, row, "v"))
			}
			if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
				t.Fatalf("merged\n got %s\nwant %s (the engine's, in one tenant)", g, w)
			}
		})
	}
}

// fieldText is a row's field as JSON, "-" when the row lacks it.
func fieldText(tb testing.TB, row map[string]any, f string) string {
	tb.Helper()
	v, ok := row[f]
	if !ok {
		return "-"
	}
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// A cross-tenant read whose query writes is refused whole, 400, before it
// runs anywhere: every write form, and statements that hide a write behind
// a read, and no tenant changed. The router never parses the query: each
// node runs it read-only.
func TestCrossTenantReadRefusesWritesCP(t *testing.T) {
	r := queryCluster(t)
	before := map[string]string{}
	for _, tn := range []string{"a", "b", "c"} {
		_, _, b := r.query(t, tn, "get orders order id")
		before[tn] = string(b)
	}
	for _, q := range []string{
		"del orders", "del orders where total > 0 returning *", "set orders {total: 0}",
		"put orders {status: 'x', total: 1}", "insert orders {status: 'x', total: 1}",
		"drop collection orders", "create collection evil (x int)", "create index on orders (status) @hash",
		"  DEL orders",
	} {
		st, _, b := r.crossRead(t, map[string]any{"tenants": "*", "query": q, "merge": map[string]any{"concat": true}})
		if st != http.StatusBadRequest || !strings.Contains(string(b), "reads only") || !strings.Contains(string(b), "/t/{tenant}/query") {
			t.Fatalf("%q: %d %s, want 400 saying reads only and where writes go", q, st, b)
		}
	}
	for _, q := range []string{"get orders; del orders", "get orders\ndel orders", `{"query": "del orders"}`, "get orders where total > $1"} {
		st, _, b := r.crossRead(t, map[string]any{"tenants": []string{"a", "b"}, "query": q, "merge": map[string]any{"concat": true}})
		if st != http.StatusBadRequest || !strings.Contains(string(b), "no tenant was read") {
			t.Fatalf("%q: %d %s, want 400", q, st, b)
		}
	}
	for _, tn := range []string{"a", "b", "c"} {
		if _, _, b := r.query(t, tn, "get orders order id"); string(b) != before[tn] {
			t.Fatalf("tenant %s changed: %s, was %s", tn, b, before[tn])
		}
		if st, _, b := r.query(t, tn, "get evil"); st != http.StatusNotFound {
			t.Fatalf("tenant %s has a collection evil: %d %s", tn, st, b)
		}
	}
}

// timeout_ms is a whole number of milliseconds from 1 to the router's
// --upstream-timeout; anything else is refused whole, saying the range,
// and nothing is read.
func TestCrossTenantReadTimeoutRefusedCP(t *testing.T) {
	r := queryCluster(t)
	for _, v := range []any{-1, 0, 60001, 1 << 62, 1.5, "100", true, []int{1}, map[string]int{}} {
		req := map[string]any{"tenants": []string{"a"}, "query": "get orders", "merge": map[string]any{"concat": true}, "timeout_ms": v}
		st, _, b := r.crossRead(t, req)
		if st != http.StatusBadRequest || !strings.Contains(string(b), "from 1 to 60000") {
			t.Fatalf("timeout_ms %v: %d %s", v, st, b)
		}
	}
	for _, v := range []any{1, 60000, nil} {
		req := map[string]any{"tenants": []string{"a"}, "query": "get orders", "merge": map[string]any{"concat": true}, "timeout_ms": v}
		if st, ans, b := r.crossRead(t, req); st != http.StatusOK || (v != 1 && len(ans.Rows) != 3) {
			t.Fatalf("timeout_ms %v: %d %s", v, st, b)
		}
	}
}
