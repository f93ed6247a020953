// Package fql is the front end of FenecQL, fenec's query language: a lexer,
// a parser that turns one statement's text into a typed AST (ast.go), a
// printer that turns the AST back into canonical text, and a pure
// expression evaluator (Eval, Truthy, Compare, Equal, SortCompare) that
// the engine's executor calls once per row.
//
// It is not the executor: it knows nothing of collections, schemas,
// indexes or storage, reads no clock of its own (Env.Now supplies now())
// and does no I/O. Whether a named collection or field exists, whether an
// annotation fits a field's type, and what a statement does to a tenant
// are the engine's to decide.
//
// # The language
//
// One statement per text; keywords are case-insensitive; identifiers are
// [A-Za-z_][A-Za-z0-9_]* and at most 64 bytes; an optional ';' may end it.
//
//	create collection [if not exists] NAME (FIELD TYPE [required] [ANNOT ...], ...)
//	drop collection [if exists] NAME
//	create index on NAME (FIELD) ANNOT
//	put NAME OBJECT|[OBJECT|$n, ...]|$n [if absent] [require N]
//	insert NAME OBJECT|[OBJECT|$n, ...]|$n [require N]
//	set NAME {FIELD: EXPR, ...} [where COND] [order KEY [asc|desc], ...] [limit N]
//	    [returning *|PATH, ...] [require N]
//	del NAME [where COND] [order ...] [limit N] [returning ...] [require N]
//	get NAME [select ITEM [as ALIAS], ...] [where COND] [match FIELD STRING|$n]
//	    [near FIELD [NUMBER, ...]|$n [ef N] [exact]] [fuse [k=N]] [group PATH, ...]
//	    [order KEY [asc|desc], ...] [limit N] [offset N] [count]
//	    [lookup CHILD on FIELD [required] [select ...] [where COND] [order ...] [limit N]]...
//	compact
//
// compact rewrites the tenant's file as an image of what it holds now,
// keeping no record from before: the bytes of deleted and overwritten
// rows, dropped collections and the graphs in the file's tail come back,
// so a tenant at its bytes quota can write again. It changes no row and
// writes no seq; change cursors from before it are gone. It is not a
// block: alone in a request, or in a /batch whose statements then each run
// on their own (the node's /batch says what that means for its answer),
// never in a block with other statements.
//
// Types: bool int float text timestamp json vector<N> [text] [int] [float].
// Annotations: @hash @unique @sorted @text[(k1=1.2, b=0.75)] @ttl(30m)
// (units ms s m h d) @hnsw(cosine|l2|dot [, m=32] [, ef_construction=100]
// [, ef_search=256]). Select items: PATH, *, count(*), count(PATH),
// sum/avg/min/max(PATH). The clauses of set, del and get (before the first
// lookup) may come in any order, each once; the clauses after a lookup are
// that lookup's, and a further lookup nests under it (at most 8).
//
// Conditions and expressions, loosest first: or; and; not; the
// comparisons = != < <= > >= ~ (RE2) has, in (...)|in $n, is [not] null;
// + -; * /; unary minus. Operands: field paths (a, a.b into json),
// true false null, integers, floats, "..." or '...' strings with
// backslash escapes (\" \' \\ \/ \n \t \r \b \f \0 \uXXXX), lists [...],
// objects {key: value, "quoted key": value}, $n, now(), parentheses.
//
// Limits, each an error and never a silent cut: 1 MiB of text, nesting 64
// deep (parentheses, lists, objects, not, unary minus), an expression's
// tree at most 1000 levels (a chain of 999 or's), identifiers of 64 bytes,
// integer literals within int64, valid UTF-8, limit + offset at most
// 10000, 8 nested lookups.
package fql
