package fql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// mustParse parses text or fails the test.
func mustParse(t testing.TB, text string) Stmt {
	t.Helper()
	st, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return st
}

// TestParsePrint parses each form and compares the canonical text; the
// canonical text must parse again to itself.
func TestParsePrint(t *testing.T) {
	tests := []struct{ in, want string }{
		// create collection, every type and annotation
		{`create collection users (name text required @hash, age int @sorted)`,
			`create collection users (name text required @hash, age int @sorted)`},
		{`CREATE COLLECTION IF NOT EXISTS t (a bool, b int, c float, d text, e timestamp, f json, g vector<3>, h [text], i [int], j [float])`,
			`create collection if not exists t (a bool, b int, c float, d text, e timestamp, f json, g vector<3>, h [text], i [int], j [float])`},
		{`create collection docs (body text @text, title text @text(k1=1.5, b=0.5), email text @unique required)`,
			`create collection docs (body text @text, title text @text(k1=1.5, b=0.5), email text required @unique)`},
		{`create collection docs (t text @text(b=0.75, k1=1.2))`, `create collection docs (t text @text)`},
		{`create collection docs (t text @text())`, `create collection docs (t text @text)`},
		{`create collection logs (at timestamp @ttl(30m))`, `create collection logs (at timestamp @ttl(30m))`},
		{`create collection logs (at timestamp @ttl(1500ms), b timestamp @ttl(90s), c timestamp @ttl(2d), d timestamp @ttl(1.5h))`,
			`create collection logs (at timestamp @ttl(1500ms), b timestamp @ttl(90s), c timestamp @ttl(2d), d timestamp @ttl(90m))`},
		{`create collection v (e vector<128> @hnsw(cosine))`, `create collection v (e vector<128> @hnsw(cosine))`},
		{`create collection v (e vector<4> @hnsw(L2, m=24, ef_construction=150, ef_search=20))`,
			`create collection v (e vector<4> @hnsw(l2, m=24, ef_construction=150, ef_search=20))`},
		{`create collection v (e vector<4> @hnsw(dot, ef_search=256, m=32))`, `create collection v (e vector<4> @hnsw(dot))`},
		{`create collection e ()`, `create collection e ()`},
		{`drop collection users`, `drop collection users`},
		{`drop collection if exists users;`, `drop collection if exists users`},
		{`compact`, `compact`},
		{`  COMPACT ;`, `compact`},
		{`create index on users (email) @unique`, `create index on users (email) @unique`},
		{`create index on docs (body) @text(k1=2)`, `create index on docs (body) @text(k1=2.0)`},

		// put / insert
		{`put users {name: "a", "quoted key": 1, n: $2, tags: ["x", 'y'], at: now()}`,
			`put users {name: "a", "quoted key": 1, n: $2, tags: ["x", "y"], at: now()}`},
		{`put users [{name: "a"}, {id: 7, name: "b"}, $1]`, `put users [{name: "a"}, {id: 7, name: "b"}, $1]`},
		{`put users $1 if absent require 3`, `put users $1 if absent require 3`},
		{`put users $1 require 3 if absent`, `put users $1 if absent require 3`},
		{`insert users {n: 1 + 2 * 3, at: now() + 30000, neg: -5, f: 1.5e3, z: null}`,
			`insert users {n: 1 + 2 * 3, at: now() + 30000, neg: -5, f: 1500.0, z: null}`},
		{`insert users $1 require 1`, `insert users $1 require 1`},
		{`put t {meta: {a: {b: [1, [2]]}}}`, `put t {meta: {a: {b: [1, [2]]}}}`},

		// set / del
		{`set users {n: n + 1, seen: now(), gone: null} where id = 3`,
			`set users {n: n + 1, seen: now(), gone: null} where id = 3`},
		{`set jobs {owner: $1, at: now()} where owner is null order prio desc, id limit 1 returning * require 1`,
			`set jobs {owner: $1, at: now()} where owner is null order prio desc, id limit 1 returning * require 1`},
		{`set jobs {a: 1} returning id, a.b limit 5 where a > 0`, `set jobs {a: 1} where a > 0 limit 5 returning id, a.b`},
		{`del users`, `del users`},
		{`del users where age < 18 order age asc limit 10 returning id require 2`,
			`del users where age < 18 order age limit 10 returning id require 2`},

		// get
		{`get users`, `get users`},
		{`get users select * where name = "a"`, `get users select * where name = "a"`},
		{`get users select name, meta.city as city, id where age >= 18 and not (name ~ "^a" or tags has "x") order age desc limit 10 offset 20`,
			`get users select name, meta.city as city, id where age >= 18 and not (name ~ "^a" or tags has "x") order age desc limit 10 offset 20`},
		{`get users where status in ("a", "b") and x in $2 and y in [1, 2] count`,
			`get users where status in ("a", "b") and x in $2 and y in (1, 2) count`},
		{`get users where deleted is not null or z is null`, `get users where deleted is not null or z is null`},
		{`get orders select status, count(*) as n, sum(total), avg(total), min(total), max(total), count(note) group status order n desc, sum(total) limit 5`,
			`get orders select status, count(*) as n, sum(total), avg(total), min(total), max(total), count(note) group status order n desc, sum(total) limit 5`},
		{`get orders select count(*)`, `get orders select count(*)`},
		{`get docs match body "hello world" limit 10`, `get docs match body "hello world" limit 10`},
		{`get docs near emb [0.1, -2, 3e-2] ef 100 exact limit 3`, `get docs near emb [0.1, -2, 0.03] ef 100 exact limit 3`},
		{`get docs near emb $1 exact ef 5`, `get docs near emb $1 ef 5 exact`},
		{`get docs match body $1 near emb $2 fuse k=30 order _score desc`,
			`get docs match body $1 near emb $2 fuse k=30 order _score desc`},
		{`get docs match body $1 near emb $2 fuse`, `get docs match body $1 near emb $2 fuse`},
		{`get docs limit 5 where a = 1 select a`, `get docs select a where a = 1 limit 5`},
		{`get users lookup orders on user_id`, `get users lookup orders on user_id`},
		{`get users where id = $1 lookup orders on user_id required select id, total where total > 10 order total desc limit 5 lookup items on order_id select sku`,
			`get users where id = $1 lookup orders on user_id required select id, total where total > 10 order total desc limit 5 lookup items on order_id select sku`},
		{`get t select count`, `get t select count`},
		{`get t order by desc`, `get t order by desc`},
		{`get t order by limit 1`, `get t order by limit 1`},
		{`get t select a count`, `get t select a count`},

		// keywords in any case; names keep theirs
		{`GET Users SELECT Name AS N WHERE Age IS NOT NULL AND Tags HAS 'x' ORDER Age DESC LIMIT 1 OFFSET 1 LOOKUP Orders ON User_id REQUIRED`,
			`get Users select Name as N where Age is not null and Tags has "x" order Age desc limit 1 offset 1 lookup Orders on User_id required`},
		{`Put t {A: NOW()} IF ABSENT`, `put t {A: now()} if absent`},
		{"get\tt\n where\r\na = 1 ;", `get t where a = 1`},

		// expressions
		{`get t where a = 1 + 2 * 3 - 4 / 2`, `get t where a = 1 + 2 * 3 - 4 / 2`},
		{`get t where a = (1 + 2) * 3`, `get t where a = (1 + 2) * 3`},
		{`get t where a = 1 - (2 - 3)`, `get t where a = 1 - (2 - 3)`},
		{`get t where a = -b - -3 - - -c`, `get t where a = -b - -3 - - -c`},
		{`get t where a = -(5)`, `get t where a = -(5)`},
		{`get t where a or (b and c)`, `get t where a or b and c`},
		{`get t where (a or b) and c`, `get t where (a or b) and c`},
		{`get t where a and (b and c)`, `get t where a and (b and c)`},
		{`get t where not not a`, `get t where not not a`},
		{`get t where (not a) = b`, `get t where (not a) = b`},
		{`get t where (a = b) = c`, `get t where (a = b) = c`},
		{`get t where a != 'it\'s' and b <= 2.5 and c > -9223372036854775808`,
			`get t where a != "it's" and b <= 2.5 and c > -9223372036854775808`},
		{`get t where s = "tab\there\u00e9\ud83d\ude00 \"q\" \\ \/"`, "get t where s = \"tab\\there\u00e9\U0001F600 \\\"q\\\" \\\\ /\""},
		{`get t where TRUE = False or x = NULL`, `get t where true = false or x = null`},
		{`get t where now = now()`, `get t where now = now()`},
		{`get t where a.b.c < 1e300`, `get t where a.b.c < 1e+300`},
		{`get t where o = {k: 1, "a b": [true]}`, `get t where o = {k: 1, "a b": [true]}`},
		{`get t where x in ()`, `get t where x in ()`},
	}
	for _, tc := range tests {
		st := mustParse(t, tc.in)
		if got := st.String(); got != tc.want {
			t.Errorf("Parse(%q).String()\n got %s\nwant %s", tc.in, got, tc.want)
			continue
		}
		again := mustParse(t, tc.want)
		if got := again.String(); got != tc.want {
			t.Errorf("canonical text %q does not parse to itself: %s", tc.want, got)
		}
	}
}

// TestParseAST checks the tree, not just its printing, for a few forms
// where the shape matters to the executor.
func TestParseAST(t *testing.T) {
	st := mustParse(t, `get users select a, count(*) as n where x = 1 and y ~ "z" group a order n desc limit 5 lookup orders on user_id required lookup items on order_id`)
	g, ok := st.(*Get)
	if !ok {
		t.Fatalf("got %T, want *Get", st)
	}
	if g.Coll != "users" || len(g.Select) != 2 || g.Select[1].Agg != AggCount || !g.Select[1].Star || g.Select[1].Alias != "n" {
		t.Errorf("select: %+v", g.Select)
	}
	if g.Select[1].Name() != "n" || g.Select[0].Name() != "a" {
		t.Errorf("names: %q %q", g.Select[0].Name(), g.Select[1].Name())
	}
	and, ok := g.Where.(*Binary)
	if !ok || and.Op != OpAnd {
		t.Fatalf("where: %#v", g.Where)
	}
	if re, ok := and.R.(*Regex); !ok || re.re.Load() == nil {
		t.Errorf("literal regex not compiled at parse: %#v", and.R)
	}
	if g.Limit == nil || *g.Limit != 5 || g.Offset != 0 {
		t.Errorf("limit/offset: %v %d", g.Limit, g.Offset)
	}
	if len(g.Order) != 1 || !g.Order[0].Desc || g.Order[0].Name() != "n" {
		t.Errorf("order: %+v", g.Order)
	}
	l := g.Lookup
	if l == nil || l.Child != "orders" || l.On != "user_id" || !l.Required || l.Lookup == nil || l.Lookup.Child != "items" || l.Lookup.Required {
		t.Errorf("lookup chain: %+v", l)
	}

	lit := mustParse(t, `put t {a: -9223372036854775808, b: 2.0, c: "x", d: true, e: null}`).(*Put)
	obj := lit.Docs.(*ObjectLit)
	want := []any{int64(-9223372036854775808), 2.0, "x", true, nil}
	for i, f := range obj.Fields {
		if got := f.Value.(*Literal).Value; got != want[i] {
			t.Errorf("%s = %#v (%T), want %#v (%T)", f.Key, got, got, want[i], want[i])
		}
	}
	if lit.Require != nil || lit.IfAbsent {
		t.Errorf("put flags: %+v", lit)
	}

	cc := mustParse(t, `create collection c (v vector<8> required @hnsw(dot, m=8), t text @text(k1=2) @unique, at timestamp @ttl(1h))`).(*CreateCollection)
	v := cc.Fields[0]
	if v.Type != (Type{Kind: TypeVector, Dim: 8}) || !v.Required || len(v.Annots) != 1 {
		t.Fatalf("field v: %+v", v)
	}
	if a := v.Annots[0]; a.Kind != AnnotHNSW || a.Metric != MetricDot || a.M != 8 || a.EfConstruction != DefaultEfConstruction || a.EfSearch != DefaultEfSearch {
		t.Errorf("@hnsw: %+v", a)
	}
	if a := cc.Fields[1].Annots[0]; a.Kind != AnnotText || a.K1 != 2 || a.B != DefaultB {
		t.Errorf("@text: %+v", a)
	}
	if a := cc.Fields[2].Annots[0]; a.Kind != AnnotTTL || a.TTLms != 3600000 {
		t.Errorf("@ttl: %+v", a)
	}

	set := mustParse(t, `set t {n: n + 1} where id = 1 require 0`).(*Set)
	if set.Require == nil || *set.Require != 0 || set.Assigns[0].Field != "n" {
		t.Errorf("set: %+v", set)
	}
	near := mustParse(t, `get t near v [1, 2]`).(*Get).Near
	if near.Ef != 0 || near.Exact || near.Field != "v" {
		t.Errorf("near: %+v", near)
	}
	fuse := mustParse(t, `get t match a "x" near v [1] fuse`).(*Get).Fuse
	if fuse.K != DefaultFuseK {
		t.Errorf("fuse k = %d", fuse.K)
	}
}

func TestParsePositions(t *testing.T) {
	st := mustParse(t, `get t where a = 1 and b > 2`)
	and := st.(*Get).Where.(*Binary)
	if and.At != 12 || and.L.Pos() != 12 || and.R.Pos() != 22 || and.R.(*Binary).R.Pos() != 26 {
		t.Errorf("positions: and %d, L %d, R %d", and.At, and.L.Pos(), and.R.Pos())
	}
}

// TestNodePositions checks the At of the nodes the executor reports
// errors against.
func TestNodePositions(t *testing.T) {
	text := `create collection c (a int @hash, v vector<2> @hnsw(l2))`
	cc := mustParse(t, text).(*CreateCollection)
	at := func(sub string) int { return strings.Index(text, sub) }
	if cc.At != 0 || cc.Fields[0].At != at("a int") || cc.Fields[0].Annots[0].At != at("@hash") || cc.Fields[1].Annots[0].At != at("@hnsw") {
		t.Errorf("create collection positions: %+v", cc)
	}

	text = `  set t {a: 1, "b": b + 1} where x = 1 order y desc limit 2 returning * require 1`
	set := mustParse(t, text).(*Set)
	if set.At != 2 || set.Assigns[0].At != at("a: 1") || set.Assigns[1].At != at(`"b"`) || set.Assigns[1].Value.Pos() != at("b + 1") ||
		set.Where.Pos() != at("x = 1") || set.Order[0].At != at("y desc") || set.Returning.At != at("returning") {
		t.Errorf("set positions: %+v", set)
	}

	text = `get t select a as b, sum(c) where x = 1 match m "q" near v [1] fuse group a lookup o on p lookup i on q`
	g := mustParse(t, text).(*Get)
	if g.Select[0].At != at("a as b") || g.Select[1].At != at("sum(c)") || g.Match.At != at("match") ||
		g.Near.At != at("near") || g.Fuse.At != at("fuse") || g.Lookup.At != at("lookup o") || g.Lookup.Lookup.At != at("lookup i") {
		t.Errorf("get positions: %+v", g)
	}

	text = `put t [{a: -1}, $2]`
	put := mustParse(t, text).(*Put)
	list := put.Docs.(*ListLit)
	obj := list.Elems[0].(*ObjectLit)
	if list.At != at("[") || obj.At != at("{") || obj.Fields[0].At != at("a:") || obj.Fields[0].Value.Pos() != at("-1") || list.Elems[1].Pos() != at("$2") {
		t.Errorf("put positions: %s", put)
	}
}

func TestParams(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{`get t`, 0},
		{`get t where a = $1 and b in $3`, 3},
		{`put t [{a: $2}, $5]`, 5},
		{`set t {a: $4} where b = $1`, 4},
		{`get t match a $7 near v $2 fuse`, 7},
		{`get t lookup o on t_id where x = $9`, 9},
		{`del t where a ~ $2`, 2},
	}
	for _, tc := range tests {
		if got := Params(mustParse(t, tc.in)); got != tc.want {
			t.Errorf("Params(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestInspect(t *testing.T) {
	st := mustParse(t, `set t {a: [1, {b: $1}]} where not (x in (1, 2) and y ~ "z" and w is null)`)
	var kinds []string
	Inspect(st, func(n Node) bool {
		kinds = append(kinds, fmt.Sprintf("%T", n))
		_, isIn := n.(*In)
		return !isIn // do not go below in
	})
	want := "*fql.Set *fql.ListLit *fql.Literal *fql.ObjectLit *fql.Param *fql.Unary *fql.Binary *fql.Binary *fql.In *fql.Regex *fql.Field *fql.Literal *fql.IsNull *fql.Field"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("Inspect visited\n %s\nwant\n %s", got, want)
	}
}

func TestParseExpr(t *testing.T) {
	e, err := ParseExpr(`status = "open" and prio > $1`)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.String(); got != `status = "open" and prio > $1` {
		t.Errorf("got %s", got)
	}
	if _, err := ParseExpr(`a = 1 order b`); err == nil {
		t.Error("trailing clause accepted by ParseExpr")
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a", MaxIdent+1)
	deep := strings.Repeat("(", MaxDepth+1) + "1" + strings.Repeat(")", MaxDepth+1)
	okDeep := strings.Repeat("(", MaxDepth) + "1" + strings.Repeat(")", MaxDepth)
	if _, err := Parse("get t where a = " + okDeep); err != nil {
		t.Errorf("depth %d refused: %v", MaxDepth, err)
	}
	nine := "get a" + strings.Repeat(" lookup b on c", MaxLookupDepth+1)
	if _, err := Parse("get a" + strings.Repeat(" lookup b on c", MaxLookupDepth)); err != nil {
		t.Errorf("%d lookups refused: %v", MaxLookupDepth, err)
	}
	if _, err := Parse("get t where " + strings.Repeat("a or ", MaxHeight-1) + "a"); err != nil {
		t.Errorf("expression %d levels deep refused: %v", MaxHeight, err)
	}
	tests := []struct {
		in  string
		pos int
		msg string
	}{
		{"get t where " + strings.Repeat("a or ", MaxHeight) + "a", 12, `expression more than 1000 levels deep`},
		{"get t where x = " + strings.Repeat("1 + ", MaxHeight) + "1", 12, `expression more than 1000 levels deep`},
		{"put t [" + strings.Repeat("1 * ", MaxHeight) + "1]", 6, `expression more than 1000 levels deep`},
		{"get t near v [" + strings.Repeat("1 - ", MaxHeight) + "1]", 13, `expression more than 1000 levels deep`},
		{"get t near v [" + strings.Repeat("1 - ", 50) + "1]", 14, `a vector holds numbers, found 1 - 1 - 1 - 1 - 1 - 1 - 1 - 1 - 1 - 1 - ...`},
		{``, 0, `expected a statement (get, put, insert, set, del, create, drop, compact), found end of statement`},
		{`!x`, 0, `unexpected character '!'`},
		{`get t where a = ` + strings.Repeat("9", 100), 16, `integer 9999999999999999999999999999999999999999... does not fit`},
		{`get t where a = $` + strings.Repeat("9", 100), 16, `not $9999999999999999999999999999999999999999...`},
		{`get t limit ` + strings.Repeat("9", 100), 12, `integer 9999999999999999999999999999999999999999... does not fit`},
		{`get t "` + strings.Repeat("é", 30) + `"`, 6, `found string "` + strings.Repeat("é", 20) + `..."`},
		{`get t where a == 1`, 14, `write = to compare, not ==`},
		{`get t where a <> 1`, 14, `write != to compare, not <>`},
		{`get t where a = 1 && b = 2`, 18, `unexpected character '&' (write and)`},
		{`get t where a = 1 || b = 2`, 18, `unexpected character '|' (write or)`},
		{`get t where !a`, 12, `(write not, or != to compare)`},
		{`get t order by name desc`, 12, `write order name, without by`},
		{`del t order by name`, 12, `write order name, without by`},
		{`get t select count(*) group by status`, 28, `write group status, without by`},
		{`select * from t`, 0, `expected a statement`},
		{`get`, 3, `expected a collection name, found end of statement`},
		{`create collection t (a int where`, 27, `expected ')' after field list, found "where"`},
		{`create collection t (a integer)`, 23, `unknown type "integer"`},
		{`create collection t (a [bool])`, 24, `lists hold text, int or float, not "bool"`},
		{`create collection t (a vector<0>)`, 30, `the vector dimension must be between 1 and 65536, not 0`},
		{`create collection t (id int)`, 21, `field id is implicit`},
		{`create collection t (a int, a text)`, 28, `field a declared twice`},
		{`create collection t (a int @hash @hash)`, 33, `@hash given twice on field a`},
		{`create collection t (a int @index)`, 27, `unknown annotation @index`},
		{`create collection t (a timestamp @ttl(30))`, 40, `expected a unit (ms, s, m, h or d) right after 30, found ")"`},
		{`create collection t (a timestamp @ttl(30 m))`, 41, `expected a unit`},
		{`create collection t (a timestamp @ttl(0.1ms))`, 38, `whole number of milliseconds`},
		{`create collection t (a text @text(k1=0))`, 37, `k1 must be above 0`},
		{`create collection t (a text @text(c=1))`, 34, `unknown @text parameter c`},
		{`create collection t (a text @text(b=1, b=0))`, 39, `b given twice in @text`},
		{`create collection t (a vector<2> @hnsw(cos))`, 39, `unknown metric "cos"`},
		{`create collection t (a vector<2> @hnsw(l2, m=1))`, 45, `m must be a whole number between 2 and 256`},
		{`create collection t (a vector<2> @hnsw)`, 38, `expected '(' after @hnsw`},
		{`create table t`, 7, `expected "collection" or "index" after create, found "table"`},
		{`create index on t (a)`, 21, `expected an annotation`},
		{`drop t`, 5, `expected "collection" after drop`},
		{`drop collection if t`, 19, `expected "exists" after if`},
		{`compact users`, 8, `expected end of statement, found "users"`},
		{`compacts`, 0, `expected a statement`},
		{`put t`, 5, `expected an object, a list of objects or a parameter`},
		{`put t {a: b}`, 10, `a document value cannot name a field (b)`},
		{`put t [1]`, 7, `expected an object or a parameter in the list of documents, found 1`},
		{`put t {a: 1, a: 2}`, 13, `key "a" given twice`},
		{`put t {a 1}`, 9, `expected ':' after the key "a", found "1"`},
		{`put t {a: 1} if present`, 16, `expected "absent" after if`},
		{`insert t {a: 1} if absent`, 16, `expected end of statement, found "if"`},
		{`put t {} require 1 require 2`, 19, `"require" given twice`},
		{`put t {} require -1`, 17, `expected a row count after require, found "-"`},
		{`set t where a = 1`, 6, `expected '{' with the fields to set`},
		{`set t {id: 1}`, 7, `the id of a row cannot be set`},
		{`set t {}`, 6, `set needs at least one field`},
		{`set t {a: 1} where a = 1 where b = 2`, 25, `"where" given twice`},
		{`del t where`, 11, `expected an expression, found end of statement`},
		{`del t count`, 6, `expected where, order, limit, returning, require or end of statement, found "count"`},
		{`get t where a = 1 where b = 2`, 18, `"where" given twice`},
		{`get t where a = = 1`, 16, `expected an expression, found "="`},
		{`get t where a = 1 = 2`, 18, `expected select, where, match, near, fuse, group, order, limit, offset, count, lookup or end of statement, found "="`},
		{`get t "select" a`, 6, `expected select, where`},
		{`get t where (a = 1`, 18, `expected ')' to close '(', found end of statement`},
		{`get t where a in 1`, 17, `expected '(' with values or a parameter after in`},
		{`get t where a is 1`, 17, `expected "null" after is`},
		{`get t where a ~ "("`, 16, `bad regular expression: missing closing ): ` + "`(`"},
		{`get t where a ~ 1`, 16, `the pattern after ~ must be text`},
		{`get t where a = 9223372036854775808`, 16, `integer 9223372036854775808 does not fit in 64 bits`},
		{`get t where a = -9223372036854775809`, 16, `integer -9223372036854775809 does not fit in 64 bits`},
		{`get t where a = 1e999`, 16, `number 1e999 is out of range`},
		{`get t where a = $0`, 16, `parameters are numbered $1 to $65535, not $0`},
		{`get t where a = $`, 16, `expected a parameter number after '$'`},
		{`get t where a = "abc`, 16, `string not closed`},
		{`get t where a = "\q"`, 17, `unknown escape \q in string`},
		{`get t where a = "\ud800"`, 17, `lone UTF-16 surrogate`},
		{`get t where a = "\u12"`, 17, `expected four hex digits after \u`},
		{`get t where a = #`, 16, `unexpected character '#'`},
		{"get t where a = \"\xff\"", 17, `invalid UTF-8`},
		{`get ` + long, 4, `identifier longer than 64 bytes`},
		{`get t where a = ` + deep, 16 + MaxDepth, `nesting deeper than 64 levels`},
		{`get t where ` + strings.Repeat("not ", MaxDepth+1) + "a", 12 + 4*MaxDepth, `nesting deeper than 64 levels`},
		{`get t where a = ` + strings.Repeat("[", MaxDepth+1), 16 + MaxDepth, `nesting deeper than 64 levels`},
		{`put t ` + strings.Repeat("{a: ", MaxDepth+1), 6 + 4*MaxDepth, `nesting deeper than 64 levels`},
		{`get t where a = ` + strings.Repeat("-", MaxDepth+1) + "b", 16 + MaxDepth, `nesting deeper than 64 levels`},
		{`get t limit 10001`, 12, `the row count after limit must be between 0 and 10000, not 10001`},
		{`get t limit 9000 offset 1001`, 17, `limit plus offset must be at most 10000`},
		{`get t offset 10001`, 13, `the row count after offset must be between 0 and 10000`},
		{`get t limit -1`, 12, `expected the row count after limit, found "-"`},
		{`get t fuse`, 6, `fuse needs both match and near`},
		{`get t match a "x" near v [1]`, 18, `match and near together need fuse`},
		{`get t match a 1`, 14, `match takes a string or a parameter, found 1`},
		{`get t near v "x"`, 13, `near takes a list of numbers or a parameter`},
		{`get t near v [1, "x"]`, 17, `a vector holds numbers, found "x"`},
		{`get t near v []`, 13, `near needs a vector of at least one number`},
		{`get t near v [1] ef 0`, 20, `ef must be between 1 and 10000`},
		{`get t select *, a`, 13, `* must be the only item of select`},
		{`get t select a, count(*)`, 13, `a is neither a group key nor an aggregate`},
		{`get t select a, count(*) group b`, 13, `a is neither a group key nor an aggregate`},
		{`get t select * group b`, 13, `select * cannot be used with group`},
		{`get t select a, a`, 16, `two select items are named a (use as)`},
		{`get t select sum(*)`, 17, `only count takes *`},
		{`get t select foo(a)`, 13, `unknown aggregate "foo"`},
		{`get t select count(*) group a count`, 30, `count cannot be used with group`},
		{`get t order *`, 12, `cannot order by *`},
		{`get t select`, 12, `expected '*', an aggregate or a field to select, found end of statement`},
		{`get t lookup o`, 14, `expected "on" after the collection of lookup`},
		{`get t lookup o on x count`, 20, `expected select, where, order, limit, lookup or end of statement`},
		{`get t lookup o on x select count(*)`, 27, `a lookup's select takes fields, not aggregates`},
		{nine, 5 + 14*MaxLookupDepth + 1, `lookups nest at most 8 deep`},
		{`get t where a.`, 14, `expected a field name after '.'`},
		{`get t; get u`, 7, `expected end of statement, found "get"`},
		{`get t where a = now(`, 20, `expected ')' after now(`},
	}
	for _, tc := range tests {
		_, err := Parse(tc.in)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want an *Error", cutText(tc.in), err)
			continue
		}
		if pe.Pos != tc.pos || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("Parse(%q)\n got at %d: %s\nwant at %d: %s", cutText(tc.in), pe.Pos, pe.Msg, tc.pos, tc.msg)
		}
	}
}

func TestParseTooLong(t *testing.T) {
	text := "get t where a = \"" + strings.Repeat("x", MaxText) + "\""
	_, err := Parse(text)
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "longer than") {
		t.Fatalf("got %v, want a too-long error", err)
	}
	fits := "get t where a = \"" + strings.Repeat("x", MaxText-18) + "\""
	if len(fits) != MaxText {
		t.Fatalf("test text is %d bytes", len(fits))
	}
	if _, err := Parse(fits); err != nil {
		t.Fatalf("text of exactly %d bytes refused: %v", MaxText, err)
	}
}

// Row counts past MaxRows are refused as ErrTooMany (limit, offset, both
// together, on a get or a write's limit); other number errors are not.
func TestParseTooManyRows(t *testing.T) {
	for _, tc := range []struct {
		in   string
		many bool
	}{
		{"get t limit 10001", true},
		{"get t offset 10001", true},
		{"get t limit 6000 offset 4001", true},
		{"del t where a = 1 limit 10001", true},
		{"get t limit 6000 offset 4000", false},
		{"get t limit -1", false},
	} {
		_, err := Parse(tc.in)
		if got := errors.Is(err, ErrTooMany); got != tc.many {
			t.Errorf("Parse(%q) = %v: ErrTooMany %v, want %v", tc.in, err, got, tc.many)
		}
		if !tc.many && strings.Contains(tc.in, "-1") && err == nil {
			t.Errorf("Parse(%q) took a negative limit", tc.in)
		}
	}
}
