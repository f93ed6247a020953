package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

// step is one statement of a scripted table test and what it answers.
type step struct {
	q      string
	params []any
	want   string // JSON answer; empty with err set
	err    error  // errors.Is target
}

func runSteps(t *testing.T, db *DB, steps []step) {
	t.Helper()
	for _, s := range steps {
		if s.err != nil {
			err := execErr(t, db, s.q, s.params...)
			var pe *ParseError
			if s.err == errParse && errors.As(err, &pe) {
				continue
			}
			if !errors.Is(err, s.err) {
				t.Errorf("%s: err = %v, want %v", s.q, err, s.err)
			}
			continue
		}
		got := mustExec(t, db, s.q, s.params...)
		if !jsonEq(t, got, s.want) {
			t.Errorf("%s\n got: %s\nwant: %s", s.q, got, s.want)
		}
	}
}

// errParse in a step wants a *ParseError.
var errParse = errors.New("a parse error")

const t0 = int64(1_700_000_000_000)

func TestStatements(t *testing.T) {
	clock := newFakeClock(t0)
	db, _ := newTestDB(t, Options{NoSweep: true, Now: clock.Now})
	runSteps(t, db, []step{
		{q: "create collection users (name text required @unique, age int @sorted, score float, tags [text], meta json, active bool)",
			want: `{"message":"created collection users"}`},
		{q: "create collection users (x int)", err: ErrInvalid},
		{q: "create collection if not exists users (x int)", want: `{"message":"collection users exists"}`},
		{q: `put users [{name: "ann", age: 30, score: 1, tags: ["a","b"], meta: {k: 1}, active: true},
			{name: "bob", age: 25, score: 2.5}, {name: "cy", age: 35}]`, want: `{"affected":3,"ids":[1,2,3]}`},
		{q: "get users select id, name, score", want: `[{"id":1,"name":"ann","score":1},{"id":2,"name":"bob","score":2.5},{"id":3,"name":"cy","score":null}]`},
		{q: "get users select name where age >= 30 order age desc", want: `[{"name":"cy"},{"name":"ann"}]`},
		{q: "get users select name where tags has 'b'", want: `[{"name":"ann"}]`},
		{q: "get users select name where meta.k = 1", want: `[{"name":"ann"}]`},
		{q: "get users select meta.k where id = 1", want: `[{"meta.k":1}]`},
		{q: "get users select name where name in ('bob', 'cy', 'zed')", want: `[{"name":"bob"},{"name":"cy"}]`},
		{q: "get users select name where name in $1", params: []any{[]any{"ann"}}, want: `[{"name":"ann"}]`},
		{q: "get users select name where name ~ '^b'", want: `[{"name":"bob"}]`},
		{q: "get users select name where score is null", want: `[{"name":"cy"}]`},
		{q: "get users select name where score is not null and not (age < 27)", want: `[{"name":"ann"}]`},
		{q: "get users select name where age > 26 or name = 'bob' order name desc", want: `[{"name":"cy"},{"name":"bob"},{"name":"ann"}]`},
		{q: "get users select name order age limit 1 offset 1", want: `[{"name":"ann"}]`},
		{q: "get users where age > 26 count", want: `{"count":2}`},
		{q: "get users count", want: `{"count":3}`},
		{q: "get users select count(*), sum(age), avg(score), min(age), max(name)",
			want: `[{"count(*)":3,"sum(age)":90,"avg(score)":1.75,"min(age)":25,"max(name)":"cy"}]`},
		{q: "get users select count(score) as n", want: `[{"n":2}]`},
		// insert refuses a taken id or unique value, whole.
		{q: `insert users [{name: "dee", age: 40}, {name: "ann"}]`, err: ErrTaken},
		{q: "get users count", want: `{"count":3}`},
		{q: `insert users {id: 2, name: "x"}`, err: ErrTaken},
		{q: `insert users {name: "dee", age: 40, active: false}`, want: `{"affected":1,"ids":[4]}`},
		{q: `put users {id: 2, name: "bob", age: 26}`, want: `{"affected":1,"ids":[2]}`},
		{q: "get users select name, score where id = 2", want: `[{"name":"bob","score":null}]`},
		{q: `put users {name: "ann"} if absent`, want: `{"affected":0,"ids":[]}`},
		{q: `put users [{id: 2, name: "zz"}, {id: 9, name: "nine"}] if absent`, want: `{"affected":1,"ids":[9]}`},
		{q: `put users {name: "bob", age: 1}`, err: ErrTaken},
		{q: "put users $1", params: []any{map[string]any{"name": "pat", "age": 50.0}}, want: `{"affected":1,"ids":[10]}`},
		{q: "get users select id where name = 'pat'", want: `[{"id":10}]`},
		// set with expressions, order, limit, returning, require.
		{q: "set users {age: age + 1, score: 0.5} where name = 'bob' returning name, age", want: `[{"name":"bob","age":27}]`},
		{q: "set users {active: true} where active is null order age desc limit 2", want: `{"affected":2}`},
		{q: "get users select name where active = true order id", want: `[{"name":"ann"},{"name":"cy"},{"name":"pat"}]`},
		{q: "set users {age: 1} where name = 'nobody' require 1", err: ErrRequire},
		{q: "set users {name: 'ann'} where name = 'bob'", err: ErrTaken},
		{q: "set users {name: null} where name = 'bob'", err: ErrType},
		{q: "set users {id: 5} where name = 'bob'", err: errParse},
		{q: "set users {nope: 5}", err: ErrUnknownField},
		{q: "set users {age: 'old'} where name = 'bob'", err: ErrType},
		// del.
		{q: "del users where name = 'nine' returning name", want: `[{"name":"nine"}]`},
		{q: "del users where age < 0", want: `{"affected":0}`},
		{q: "del users where name = 'pat' require 1", want: `{"affected":1}`},
		{q: "get users select name order id", want: `[{"name":"ann"},{"name":"bob"},{"name":"cy"},{"name":"dee"}]`},
		// ids are never reused.
		{q: `put users {name: "new"}`, want: `{"affected":1,"ids":[11]}`},
		{q: "get users select id where name = 'new'", want: `[{"id":11}]`},
		// group.
		{q: "get users select active, count(*) as n group active order n desc, active",
			want: `[{"active":null,"n":2},{"active":true,"n":2},{"active":false,"n":1}]`},
		{q: "get users select active, count(*) group active order active limit 2",
			want: `[{"active":null,"count(*)":2},{"active":false,"count(*)":1}]`},
		// type checking.
		{q: `put users {name: 5}`, err: ErrType},
		{q: `put users {age: 3}`, err: ErrType},
		{q: `put users {name: "q", nope: 1}`, err: ErrUnknownField},
		{q: `put users {name: "q", age: 1.5}`, err: ErrType},
		{q: `put users {name: "q", score: 2}`, want: `{"affected":1,"ids":[12]}`},
		{q: "get users select score where name = 'q'", want: `[{"score":2}]`},
		{q: `put users {name: "r", tags: [1]}`, err: ErrType},
		{q: "get nope", err: ErrUnknownCollection},
		{q: "get users where nope = 1", err: ErrUnknownField},
		{q: "get users where age + 'x' > 1", err: ErrType},
		{q: "get users where id = $2", params: []any{1}, err: ErrInvalid},
		// drop and re-create keeps the id counter.
		{q: "drop collection users", want: `{"message":"dropped collection users"}`},
		{q: "drop collection users", err: ErrUnknownCollection},
		{q: "drop collection if exists users", want: `{"message":"no collection users"}`},
		{q: "create collection users (name text)", want: `{"message":"created collection users"}`},
		{q: `put users {name: "again"}`, want: `{"affected":1,"ids":[13]}`},
		{q: "get users select id", want: `[{"id":13}]`},
	})
}

func TestLookupChain(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	runSteps(t, db, []step{
		{q: "create collection users (name text)", want: `{"message":"created collection users"}`},
		{q: "create collection orders (user int, total int)", want: `{"message":"created collection orders"}`},
		{q: "create collection items (order int, sku text)", want: `{"message":"created collection items"}`},
		{q: `put users [{name: "a"}, {name: "b"}, {name: "c"}]`, want: `{"affected":3,"ids":[1,2,3]}`},
		{q: `put orders [{user: 1, total: 10}, {user: 1, total: 30}, {user: 2, total: 5}, {user: 1, total: 20}]`, want: `{"affected":4,"ids":[1,2,3,4]}`},
		{q: `put items [{order: 1, sku: "x"}, {order: 2, sku: "y"}, {order: 2, sku: "z"}]`, want: `{"affected":3,"ids":[1,2,3]}`},
		{q: "get users select name lookup orders on user select total order total desc limit 2",
			want: `[{"name":"a","orders":[{"total":30},{"total":20}]},{"name":"b","orders":[{"total":5}]},{"name":"c","orders":[]}]`},
		{q: "get users select name lookup orders on user required where total > 6",
			want: `[{"name":"a","orders":[{"id":1,"total":10,"user":1},{"id":2,"total":30,"user":1},{"id":4,"total":20,"user":1}]}]`},
		{q: "get users select name where id = 1 lookup orders on user select total lookup items on order required select sku",
			want: `[{"name":"a","orders":[{"total":10,"items":[{"sku":"x"}]},{"total":30,"items":[{"sku":"y"},{"sku":"z"}]}]}]`},
		{q: "get users select name lookup orders on user required limit 1",
			want: `[{"name":"a","orders":[{"id":1,"total":10,"user":1}]},{"name":"b","orders":[{"id":3,"total":5,"user":2}]}]`},
		// The lookup index follows writes made after it was built.
		{q: `put orders {user: 3, total: 1}`, want: `{"affected":1,"ids":[5]}`},
		{q: "get users select name where id = 3 lookup orders on user select total", want: `[{"name":"c","orders":[{"total":1}]}]`},
		{q: "get users lookup nope on user", err: ErrUnknownCollection},
	})
}

func TestQueueClaim(t *testing.T) {
	clock := newFakeClock(t0)
	db, _ := newTestDB(t, Options{NoSweep: true, Now: clock.Now})
	mustExec(t, db, "create collection jobs (owner text, until timestamp, n int)")
	mustExec(t, db, `put jobs [{n: 1}, {n: 2}, {n: 3}]`)
	claim := "set jobs {owner: $1} where owner is null order id limit 1 returning *"
	for i, want := range []string{
		`[{"id":1,"n":1,"owner":"w1","until":null}]`,
		`[{"id":2,"n":2,"owner":"w2","until":null}]`,
		`[{"id":3,"n":3,"owner":"w3","until":null}]`,
		`[]`,
	} {
		got := mustExec(t, db, claim, []string{"w1", "w2", "w3", "w4"}[i])
		if !jsonEq(t, got, want) {
			t.Errorf("claim %d: got %s want %s", i, got, want)
		}
	}
	res, _, err := db.Exec(t.Context(), Statement{Query: claim, Params: []any{"w"}})
	if err != nil || !res.Claim || !res.WakeAt.IsZero() {
		t.Fatalf("empty claim: res %+v err %v", res, err)
	}
	// A lease-style claim: rows whose until has passed are free again. The
	// wake time is when the first held row's until passes.
	mustExec(t, db, "set jobs {until: $1} where id = 2", t0+5000)
	mustExec(t, db, "set jobs {until: $1} where id = 3", t0+9000)
	lease := "set jobs {owner: 'x', until: now() + 1000} where until < now() limit 1"
	res, _, err = db.Exec(t.Context(), Statement{Query: lease})
	if err != nil || res.Affected != 0 || !res.Claim {
		t.Fatalf("lease claim: %+v %v", res, err)
	}
	if got := res.WakeAt.UnixMilli(); got != t0+5000 && got != t0+5001 {
		t.Fatalf("WakeAt = %d, want %d", got, t0+5000)
	}
	// A time that flips the comparison but not the whole clause wakes
	// nothing.
	res, _, err = db.Exec(t.Context(), Statement{Query: "set jobs {owner: 'y'} where owner = 'nobody' and until < now()"})
	if err != nil || !res.Claim || !res.WakeAt.IsZero() {
		t.Fatalf("claim that time cannot help: %+v %v", res, err)
	}
	clock.Add(5001)
	res, _, err = db.Exec(t.Context(), Statement{Query: lease})
	if err != nil || res.Affected != 1 || res.Claim {
		t.Fatalf("lease claim after wake: %+v %v", res, err)
	}
}

func TestTTL(t *testing.T) {
	clock := newFakeClock(t0)
	db, path := newTestDB(t, Options{NoSweep: true, Now: clock.Now})
	mustExec(t, db, "create collection keys (k text @unique, at timestamp @ttl(10s))")
	mustExec(t, db, "put keys [{k: 'a', at: $1}, {k: 'b', at: $2}, {k: 'c'}]", t0, t0+5000)
	if got := mustExec(t, db, "get keys count"); !jsonEq(t, got, `{"count":3}`) {
		t.Fatalf("count: %s", got)
	}
	clock.Add(10_000) // a expires now (at + 10s <= now), b in 5 s
	for q, want := range map[string]string{
		"get keys count":                     `{"count":2}`,
		"get keys select k order k":          `[{"k":"b"},{"k":"c"}]`,
		"get keys select k where k = 'a'":    `[]`,
		"set keys {at: now()} where k = 'a'": `{"affected":0}`,
	} {
		if got := mustExec(t, db, q); !jsonEq(t, got, want) {
			t.Errorf("%s: got %s want %s", q, got, want)
		}
	}
	// The expired row gives its unique value up.
	if got := mustExec(t, db, "insert keys {k: 'a', at: now()}"); !jsonEq(t, got, `{"affected":1,"ids":[4]}`) {
		t.Fatalf("reinsert: %s", got)
	}
	seq := db.Seq()
	clock.Add(5_000)
	n, err := db.Sweep(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if db.Seq() != seq+1 {
		t.Fatalf("sweep seq %d, want %d", db.Seq(), seq+1)
	}
	if n, _ := db.Sweep(t.Context()); n != 0 || db.Seq() != seq+1 {
		t.Fatalf("second sweep deleted %d", n)
	}
	db.Close()
	db2, err := Open(path, Options{NoSweep: true, Now: clock.Now, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if got := mustExec(t, db2, "get keys select k order k"); !jsonEq(t, got, `[{"k":"a"},{"k":"c"}]`) {
		t.Fatalf("after reopen: %s", got)
	}
}

func TestSweeperGoroutine(t *testing.T) {
	clock := newFakeClock(t0)
	db, _ := newTestDB(t, Options{Now: clock.Now, SweepEvery: time.Millisecond})
	mustExec(t, db, "create collection s (at timestamp @ttl(1s))")
	mustExec(t, db, "put s [{at: $1}, {at: $1}]", t0)
	clock.Add(1000)
	testkit.Eventually(t, 10*time.Second, func() bool { return db.Rows() == 0 })
	if db.Seq() != 5 {
		t.Fatalf("seq %d, want 5 (a create, 2 puts, 2 deletes)", db.Seq())
	}
}

// TestParamNumbers: parameters arrive JSON-decoded, as float64 or
// json.Number; integral ones serve where ints are wanted.
func TestParamNumbers(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	runSteps(t, db, []step{
		{q: "create collection a (n int, f float, m json)", want: `{"message":"created collection a"}`},
		{q: "put a $1", params: []any{map[string]any{"id": 7.0, "n": 3.0, "f": json.Number("2"), "m": map[string]any{"x": 1.5}}}, want: `{"affected":1,"ids":[7]}`},
		{q: "put a {id: $1}", params: []any{json.Number("8")}, want: `{"affected":1,"ids":[8]}`},
		{q: "get a where id = $1", params: []any{7.0}, want: `[{"id":7,"n":3,"f":2,"m":{"x":1.5}}]`},
		{q: "get a select id where n = $1", params: []any{json.Number("3")}, want: `[{"id":7}]`},
		{q: "put a {id: $1}", params: []any{7.5}, err: ErrType},
		{q: "put a {n: $1}", params: []any{3.5}, err: ErrType},
		{q: "put a {n: $1}", params: []any{struct{}{}}, err: ErrInvalid},
		{q: "put a {}", want: `{"affected":1,"ids":[9]}`},
		{q: "get a select id order id desc limit 1", want: `[{"id":9}]`},
	})
}

// TestWakeAtIndexed: a claim's WakeAt found through a @sorted index equals
// the one found by scanning, and is the earliest time a row is taken.
func TestWakeAtIndexed(t *testing.T) {
	clock := newFakeClock(t0)
	db, _ := newTestDB(t, Options{NoSweep: true, Now: clock.Now})
	mustExec(t, db, "create collection ix (owner text, until timestamp @sorted)")
	mustExec(t, db, "create collection sc (owner text, until timestamp)")
	rng := rand.New(rand.NewPCG(5, 6))
	want := int64(0)
	for i := range 300 {
		until := t0 + 1000 + int64(rng.IntN(100_000))
		owner := any(nil)
		if i%3 != 0 {
			owner = "busy"
		} else if want == 0 || until+501 < want {
			want = until + 501 // until <= now() - 500 first holds at until+500... plus the strict <
		}
		for _, c := range []string{"ix", "sc"} {
			mustExec(t, db, "put "+c+" {owner: $1, until: $2}", owner, until)
		}
	}
	for _, q := range []string{
		"set %s {owner: 'z'} where owner is null and until < now() - 500",
		"set %s {owner: 'z'} where now() - 500 > until and owner is null",
	} {
		var got []int64
		for _, c := range []string{"ix", "sc"} {
			res, _, err := db.Exec(t.Context(), Statement{Query: fmt.Sprintf(q, c)})
			if err != nil || !res.Claim {
				t.Fatalf("%s: %+v %v", q, res, err)
			}
			got = append(got, res.WakeAt.UnixMilli())
		}
		if got[0] != want || got[1] != want {
			t.Fatalf("%s: WakeAt indexed %d, scanned %d, want %d", q, got[0], got[1], want)
		}
	}
	clock.ms.Store(want)
	if got := mustExec(t, db, "set ix {owner: 'z'} where owner is null and until < now() - 500"); !jsonEq(t, got, `{"affected":1}`) {
		t.Fatalf("at WakeAt: %s", got)
	}
}

// TestCreateIndexOnData builds indexes over rows already there; each is
// one schema change, and the indexes survive a reopen.
func TestCreateIndexOnData(t *testing.T) {
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection a (n int, s text, u text, at timestamp)")
	for i := range 20 {
		mustExec(t, db, "put a {n: $1, s: $2, u: $3, at: $4}", i%7, fmt.Sprintf("s%d", i%3), fmt.Sprintf("u%d", i), t0+int64(i))
	}
	queries := []string{
		"get a select id where n > 4 order n desc, id limit 4",
		"get a select id where s = 's1' order id",
		"get a where n = 3 count",
		"get a select id where u in ('u3', 'u9')",
	}
	var want []string
	for _, q := range queries {
		want = append(want, mustExec(t, db, q))
	}
	seq := db.Seq()
	for _, q := range []string{
		"create index on a (n) @sorted",
		"create index on a (s) @hash",
		"create index on a (u) @unique",
	} {
		mustExec(t, db, q)
	}
	if db.Seq() != seq+3 {
		t.Fatalf("seq %d, want %d", db.Seq(), seq+3)
	}
	check := func(what string) {
		t.Helper()
		for i, q := range queries {
			if got := mustExec(t, db, q); got != want[i] {
				t.Fatalf("%s: %s: %s, want %s", what, q, got, want[i])
			}
		}
		if err := execErr(t, db, "insert a {u: 'u5'}"); !errors.Is(err, ErrTaken) {
			t.Fatalf("%s: unique index not enforced: %v", what, err)
		}
	}
	check("built")
	db = reopen(t, db, path)
	check("replayed")
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	check("from the image")
	if err := execErr(t, db, "create index on a (s) @unique"); !errors.Is(err, ErrTaken) {
		t.Fatalf("unique over duplicates: %v", err)
	}
	if err := execErr(t, db, "create index on a (at) @ttl(1s)"); err != nil {
		t.Fatalf("ttl index: %v", err)
	}
	// Every at is in 2023: a ttl of a second hides them all at once.
	if got := mustExec(t, db, "get a count"); !jsonEq(t, got, `{"count":0}`) {
		t.Fatalf("after @ttl: %s", got)
	}
}

// A schema statement that finds nothing to do (create if not exists on a
// collection that is there, drop if exists on one that is not) writes
// nothing and says so: Write false, the seq where it was.
func TestSchemaNoOpsWriteNothing(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection users (x int)")
	for _, tc := range []struct {
		q     string
		write bool
	}{
		{"create collection if not exists users (x int)", false},
		{"drop collection if exists nobody", false},
		{"create collection if not exists other (x int)", true},
		{"drop collection if exists other", true},
	} {
		before := db.Seq()
		res, seq, err := db.Exec(context.Background(), Statement{Query: tc.q})
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		want := before
		if tc.write {
			want++
		}
		if res.Write != tc.write || seq != want || db.Seq() != want {
			t.Errorf("%s: Write %v, seq %d -> %d (answered %d), want Write %v and seq %d",
				tc.q, res.Write, before, db.Seq(), seq, tc.write, want)
		}
	}
}

// A limit and offset past 10 000 is a parse error that is ErrTooMany (the
// node answers it 400 like any parse error).
func TestLimitPastMaxRowsIsTooMany(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection users (x int)")
	err := execErr(t, db, "get users limit 9000 offset 1001")
	var pe *ParseError
	if !errors.Is(err, ErrTooMany) || !errors.As(err, &pe) {
		t.Fatalf("limit 9000 offset 1001: %v, want a ParseError that is ErrTooMany", err)
	}
	if err := execErr(t, db, "get users limit 9000 offset 1000"); err != nil {
		t.Fatalf("limit 9000 offset 1000: %v", err)
	}
	if err := execErr(t, db, "get users limit"); errors.Is(err, ErrTooMany) {
		t.Fatalf("a limit with no number: %v, not ErrTooMany", err)
	}
}

// A group puts values GroupEqual holds equal together at every depth: an
// int and a float of one value, lists and objects of them, and mixes.
func TestGroupIsOneEqualityAtEveryDepth(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection c (k json)")
	mustExec(t, db, "put c [{k: 1}, {k: 1.0}, {k: [1]}, {k: [1.0]}, {k: {a: 1}}, {k: {a: 1.0}}, "+
		"{k: [2, {a: [3.0]}]}, {k: [2.0, {a: [3]}]}, {k: 1.5}, {k: [1.5]}]")
	got := mustExec(t, db, "get c select k, count(*) as n group k")
	want := `[{"k":1,"n":2},{"k":1.5,"n":1},{"k":[1],"n":2},{"k":[1.5],"n":1},{"k":[2,{"a":[3.0]}],"n":2},{"k":{"a":1},"n":2}]`
	if !jsonEq(t, got, want) {
		t.Fatalf("groups %s, want %s", got, want)
	}
}
