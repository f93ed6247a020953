package fql

import (
	"regexp"
	"sync/atomic"
)

// This file is the AST: what Parse returns and what the executor runs.
// Every node records At, the byte offset in the statement text where it
// starts, so the executor can point at the part of a statement it refuses.
// Nodes are built once by the parser and never changed after; an AST may be
// shared by concurrent executions (the only mutable state, Regex's compiled
// pattern, is safe for that).
//
// Runtime values are plain Go: nil, bool, int64, float64, string,
// []float32 (a vector), []any (a list), map[string]any (json). A timestamp
// is an int64 of milliseconds since the epoch.

// Node is any node of the AST.
type Node interface {
	// Pos is the byte offset in the statement text where the node starts.
	Pos() int
	// String is the node as canonical FenecQL text; parsing it again gives
	// an equal AST (positions aside).
	String() string
}

// Stmt is one statement: *CreateCollection, *DropCollection, *CreateIndex,
// *Put, *Insert, *Set, *Del, *Get or *Compact.
type Stmt interface {
	Node
	// ReadOnly reports whether the statement only reads: running it
	// changes no row, collection or index and lands nothing in the file.
	// Of today's statements only get does; every statement says, so one
	// added later is never taken for a read by default.
	ReadOnly() bool
	// Verb is the statement's leading keywords, lower case: "get", "put",
	// "insert", "set", "del", "create collection", "drop collection",
	// "create index" or "compact".
	Verb() string
	stmtNode()
}

// Expr is an expression: *Literal, *Param, *Field, *Now, *ListLit,
// *ObjectLit, *Unary, *Binary, *Regex, *In or *IsNull.
type Expr interface {
	Node
	exprNode()
}

// Path names a field, or a value inside a json field: ["a"] is field a,
// ["a", "b"] is key b of json field a. Never empty.
type Path []string

// ---------------------------------------------------------------------------
// Types and annotations (create collection, create index)

// TypeKind is the kind of a declared field type.
type TypeKind int

// The field types. A timestamp holds int64 milliseconds since the epoch.
const (
	TypeBool      TypeKind = iota + 1 // bool
	TypeInt                           // int (int64)
	TypeFloat                         // float (float64)
	TypeText                          // text (UTF-8 string)
	TypeTimestamp                     // timestamp (int64 ms since the epoch)
	TypeJSON                          // json (any JSON value)
	TypeVector                        // vector<N> ([]float32 of length Dim)
	TypeTextList                      // [text]
	TypeIntList                       // [int]
	TypeFloatList                     // [float]
)

// Type is a declared field type. Dim is the vector dimension (1..65536)
// for TypeVector and 0 otherwise.
type Type struct {
	Kind TypeKind
	Dim  int
}

// AnnotKind is the kind of an annotation on a field.
type AnnotKind int

// The annotations. Each asks the engine for an index or a behaviour.
const (
	// AnnotHash: a hash index for = and in.
	AnnotHash AnnotKind = iota + 1
	// AnnotUnique: a hash index whose values may not repeat across rows
	// (null/missing values are not counted).
	AnnotUnique
	// AnnotSorted: an ordered index for < <= > >= and order.
	AnnotSorted
	// AnnotText: a BM25 full-text index (match), parameters K1 and B.
	AnnotText
	// AnnotTTL: rows expire TTLms after the timestamp field's value.
	AnnotTTL
	// AnnotHNSW: an HNSW vector index (near) with Metric, M,
	// EfConstruction, EfSearch.
	AnnotHNSW
)

// Distance metrics of @hnsw.
const (
	MetricCosine = "cosine"
	MetricL2     = "l2"
	MetricDot    = "dot"
)

// Defaults the parser fills in when an annotation leaves a parameter out.
const (
	DefaultK1             = 1.2
	DefaultB              = 0.75
	DefaultM              = 32
	DefaultEfConstruction = 100
	DefaultEfSearch       = 256
	DefaultFuseK          = 60
)

// Annot is one annotation: @hash @unique @sorted @text[(k1=.., b=..)]
// @ttl(DURATION) @hnsw(METRIC [, m=..] [, ef_construction=..]
// [, ef_search=..]). Only the fields of its Kind are set; the parser fills
// left-out parameters with the Default* constants, so K1/B and
// M/EfConstruction/EfSearch are always set for @text and @hnsw.
type Annot struct {
	At   int
	Kind AnnotKind

	// @text: BM25 parameters, K1 > 0 and 0 <= B <= 1.
	K1, B float64

	// @ttl: the time to live in milliseconds, > 0.
	TTLms int64

	// @hnsw: Metric is MetricCosine, MetricL2 or MetricDot; M in 2..256,
	// EfConstruction and EfSearch in 1..10000.
	Metric         string
	M              int
	EfConstruction int
	EfSearch       int
}

// FieldDef is one field of create collection:
// NAME TYPE [required] [ANNOT ...]. A required field must be present and
// not null in every written row. Name is never "id" (the implicit id int
// field); names are unique within one statement.
type FieldDef struct {
	At       int
	Name     string
	Type     Type
	Required bool
	Annots   []Annot
}

// ---------------------------------------------------------------------------
// Statements

// CreateCollection is create collection [if not exists] NAME (FIELD, ...).
// With IfNotExists an existing collection of that name is left alone and
// the statement succeeds; without it, it is an error. Every collection also
// has the implicit field id int, assigned per collection and never reused.
type CreateCollection struct {
	At          int
	IfNotExists bool
	Name        string
	Fields      []FieldDef
}

// DropCollection is drop collection [if exists] NAME: the collection, its
// rows and its indexes go. With IfExists a missing collection is no error.
type DropCollection struct {
	At       int
	IfExists bool
	Name     string
}

// Compact is compact: the tenant's file is rewritten as an image of what
// it holds now, keeping no record from before (what delete's tombstones,
// overwritten rows and the server's graphs held gives back its bytes).
// It changes no row and writes no seq; cursors from before it are gone.
type Compact struct {
	At int
}

// CreateIndex is create index on COLL (FIELD) ANNOT: adds the annotation's
// index (or behaviour) to an existing field, building it over the rows
// already there.
type CreateIndex struct {
	At    int
	Coll  string
	Field string
	Annot Annot
}

// Put is put COLL DOCS [if absent] [require N]: an upsert by id. DOCS is
// an *ObjectLit, a *ListLit whose elements are *ObjectLit or *Param, or a
// *Param; Eval of it gives a map[string]any or a []any of them (values are
// literals, parameters, arithmetic and now(); never a field). An object
// without "id" gets a new id; one with an id replaces that row whole (or
// creates it). IfAbsent writes only objects whose id, and whose @unique
// values, are not taken, and skips the others (they count as not
// affected).
type Put struct {
	At       int
	Coll     string
	Docs     Expr
	IfAbsent bool
	Require  *int64 // nil: no require clause
}

// Insert is insert COLL DOCS [require N]: like Put, but if any object's id
// or @unique value is taken the whole statement is refused (409).
type Insert struct {
	At      int
	Coll    string
	Docs    Expr
	Require *int64
}

// Assign is FIELD: EXPR in set. Value may use the row's own fields
// (n + 1), parameters, now() and null (null removes the field's value).
type Assign struct {
	At    int
	Field string
	Value Expr
}

// OrderKey is one key of an order clause: KEY [asc|desc]. Path names a
// field (or an alias, or _score); when Agg is set the key is an aggregate
// (count(*), sum(f), ...) of a grouped get and Path is its argument (nil
// with Star for count(*)). Keys are compared with SortCompare.
type OrderKey struct {
	At   int
	Agg  AggKind
	Star bool
	Path Path
	Desc bool
}

// Returning is returning * | F, ...: a write answers the rows it wrote
// (after the write; a del answers them as they were) instead of a count.
type Returning struct {
	At     int
	Star   bool
	Fields []Path
}

// Set is set COLL {FIELD: EXPR, ...} [where COND] [order ...] [limit N]
// [returning ...] [require N]: updates the matching rows (all of them
// without where), the first Limit by Order when a limit is given. Values
// are evaluated against each row as it was before the statement.
type Set struct {
	At        int
	Coll      string
	Assigns   []Assign
	Where     Expr // nil: every row
	Order     []OrderKey
	Limit     *int64 // nil: no limit
	Returning *Returning
	Require   *int64
}

// Del is del COLL [where COND] [order ...] [limit N] [returning ...]
// [require N]: deletes the matching rows.
type Del struct {
	At        int
	Coll      string
	Where     Expr
	Order     []OrderKey
	Limit     *int64
	Returning *Returning
	Require   *int64
}

// AggKind is an aggregate function of a select item or order key.
type AggKind int

// The aggregates. AggNone is a plain field (or *).
const (
	AggNone  AggKind = iota
	AggCount         // count(*): rows; count(f): rows where f is not null
	AggSum           // sum(f): numbers only; int64 while all are ints
	AggAvg           // avg(f): float64 mean of the non-null numbers
	AggMin           // min(f): least by SortCompare, nulls skipped
	AggMax           // max(f): greatest by SortCompare, nulls skipped
)

// SelectItem is one item of a select list: a field path, *, or an
// aggregate, with an optional alias. Star with AggNone is * (every field);
// Star with AggCount is count(*). Name gives the answer's key for it.
type SelectItem struct {
	At    int
	Agg   AggKind
	Star  bool
	Path  Path
	Alias string // "" when there is no as
}

// Match is match FIELD EXPR: BM25 full-text search on a @text field.
// Query is a string *Literal or a *Param. Rows come best first, each with
// _score.
type Match struct {
	At    int
	Field string
	Query Expr
}

// Near is near FIELD EXPR [ef N] [exact]: vector search on an @hnsw field.
// Vector is a *ListLit of numbers or a *Param. Ef overrides the index's
// ef_search (0: the index's own); Exact compares with every row instead of
// walking the graph. Rows come nearest first, each with _score. With no
// limit (and no fuse) near answers at most MaxRows rows: the engine
// refuses one that finds more rather than cut it.
type Near struct {
	At     int
	Field  string
	Vector Expr
	Ef     int
	Exact  bool
}

// Fuse is fuse [k=N]: reciprocal rank fusion of a match and a near in one
// get (score = Σ 1/(K + rank)). The parser requires it exactly when both
// are present.
type Fuse struct {
	At int
	K  int // DefaultFuseK when not given
}

// Lookup is lookup CHILD on FIELD [required] [select ...] [where COND]
// [order ...] [limit N]: for each parent row, the rows of collection Child
// whose FIELD equals the parent's id are attached to it as a field named
// Child (an array, possibly empty). Required drops parents with none.
// Select, Where, Order and Limit apply to each parent's children on their
// own. Lookup, when set, nests under this one (users → orders → items); a
// chain holds at most MaxLookupDepth lookups.
type Lookup struct {
	At       int
	Child    string
	On       string
	Required bool
	Select   []SelectItem
	Where    Expr
	Order    []OrderKey
	Limit    *int64
	Lookup   *Lookup
}

// Get is get COLL [select ...] [where COND] [match ...] [near ...]
// [fuse ...] [group F, ...] [order ...] [limit N] [offset N] [count]
// [lookup ...].
//
// Select empty means every field (as *). With aggregates and Group the
// answer is one row per group, and Order/Limit/Offset apply to the groups;
// aggregates without Group give one row. Count answers {"count": N}, the
// number of rows matching (before limit and offset). Limit+Offset never
// exceed MaxRows.
type Get struct {
	At     int
	Coll   string
	Select []SelectItem
	Where  Expr
	Match  *Match
	Near   *Near
	Fuse   *Fuse
	Group  []Path
	Order  []OrderKey
	Limit  *int64
	Offset int64
	Count  bool
	Lookup *Lookup
}

// ---------------------------------------------------------------------------
// Expressions

// Literal is true, false, null, an integer (int64), a float (float64) or a
// string. A minus sign written directly before a number is part of it
// (-5 is Literal{-5}).
type Literal struct {
	At    int
	Value any // nil, bool, int64, float64 or string
}

// Param is $N (N >= 1), the caller's N-th parameter, normalised (see
// Normalize).
type Param struct {
	At int
	N  int
}

// Field is a field path of the current row; a missing field or key is
// null.
type Field struct {
	At   int
	Path Path
}

// Now is now(): the statement's clock, Env.Now, int64 milliseconds since
// the epoch. One statement sees one now.
type Now struct {
	At int
}

// ListLit is [a, b, ...]; Eval gives []any.
type ListLit struct {
	At    int
	Elems []Expr
}

// ObjField is one KEY: VALUE of an object literal; Key was written bare
// or quoted.
type ObjField struct {
	At    int
	Key   string
	Value Expr
}

// ObjectLit is {key: value, ...} with distinct keys; Eval gives
// map[string]any.
type ObjectLit struct {
	At     int
	Fields []ObjField
}

// UnaryOp is a prefix operator.
type UnaryOp int

// The prefix operators.
const (
	OpNeg UnaryOp = iota + 1 // -x: int64 or float64 negation (null stays null)
	OpNot                    // not x: !Truthy(x)
)

// Unary is -X or not X.
type Unary struct {
	At int
	Op UnaryOp
	X  Expr
}

// BinaryOp is an infix operator.
type BinaryOp int

// The infix operators. Arithmetic on int64 stays int64 (overflow is
// ErrOverflow, / truncates toward zero); with a float64 on either side it
// is float64; + also joins two strings; a null operand gives null; other
// mixes are ErrType; division by zero is ErrDivZero. Comparisons give a
// bool and are false when either side is null or missing or the two do not
// compare (see Compare and Equal). and/or take Truthy of their operands and
// stop early.
const (
	OpAdd BinaryOp = iota + 1 // +
	OpSub                     // -
	OpMul                     // *
	OpDiv                     // /
	OpEq                      // =  (Equal)
	OpNe                      // != (both not null, not Equal)
	OpLt                      // <
	OpLe                      // <=
	OpGt                      // >
	OpGe                      // >=
	OpHas                     // has: L is a list holding an element Equal to R
	OpAnd                     // and
	OpOr                      // or
)

// Binary is L OP R.
type Binary struct {
	At   int
	Op   BinaryOp
	L, R Expr
}

// Regex is X ~ PATTERN: true when X is a string that the RE2 pattern
// matches anywhere (anchor with ^ and $). Pattern is a string *Literal
// (compiled by the parser, so a bad one is a parse error) or a *Param or
// other expression (compiled on first use and kept while the pattern text
// stays the same, so once per statement).
type Regex struct {
	At      int
	X       Expr
	Pattern Expr

	re atomic.Pointer[compiledRegex]
}

// compiledRegex is the pattern text, its compiled form and the size of
// its program (regex.go).
type compiledRegex struct {
	src   string
	re    *regexp.Regexp
	insts int
}

// In is X in (a, b, ...) or X in $n: true when X is not null and Equal to
// one of the set's elements. Set is a *ListLit or a *Param (a list).
type In struct {
	At  int
	X   Expr
	Set Expr

	konst *ValueSet // Set's value hashed when it is a list of literals, made by the parser
	// fixed: Set reads no field and no clock, so it is one list for every
	// row a statement evaluates it on (made by the parser); an Env that is
	// a SetCache keeps it hashed.
	fixed bool
}

// IsNull is X is null (Not false) or X is not null (Not true); the only
// test that sees a missing field or a null.
type IsNull struct {
	At  int
	X   Expr
	Not bool
}

// ---------------------------------------------------------------------------
// Limits

// The parser's limits; passing one is an error, never a silent cut.
const (
	MaxText        = 1 << 20 // bytes of statement text
	MaxDepth       = 64      // nesting of parentheses, lists, objects, unary not/minus
	MaxIdent       = 64      // bytes of an identifier
	MaxRows        = 10000   // limit + offset
	MaxLookupDepth = 8       // lookups in one chain
	MaxHeight      = 1000    // levels of one expression's tree (a or b or ... of 999 terms), so walking it stays shallow
	MaxParam       = 65535   // highest $n
	MaxVectorDim   = 65536   // vector<N>
)

func (n *CreateCollection) Pos() int { return n.At }
func (n *DropCollection) Pos() int   { return n.At }
func (n *Compact) Pos() int          { return n.At }
func (n *CreateIndex) Pos() int      { return n.At }
func (n *Put) Pos() int              { return n.At }
func (n *Insert) Pos() int           { return n.At }
func (n *Set) Pos() int              { return n.At }
func (n *Del) Pos() int              { return n.At }
func (n *Get) Pos() int              { return n.At }
func (n *Literal) Pos() int          { return n.At }
func (n *Param) Pos() int            { return n.At }
func (n *Field) Pos() int            { return n.At }
func (n *Now) Pos() int              { return n.At }
func (n *ListLit) Pos() int          { return n.At }
func (n *ObjectLit) Pos() int        { return n.At }
func (n *Unary) Pos() int            { return n.At }
func (n *Binary) Pos() int           { return n.At }
func (n *Regex) Pos() int            { return n.At }
func (n *In) Pos() int               { return n.At }
func (n *IsNull) Pos() int           { return n.At }

func (*CreateCollection) ReadOnly() bool { return false }
func (*DropCollection) ReadOnly() bool   { return false }
func (*CreateIndex) ReadOnly() bool      { return false }
func (*Put) ReadOnly() bool              { return false }
func (*Insert) ReadOnly() bool           { return false }
func (*Set) ReadOnly() bool              { return false }
func (*Del) ReadOnly() bool              { return false }
func (*Get) ReadOnly() bool              { return true }
func (*Compact) ReadOnly() bool          { return false }

func (*CreateCollection) Verb() string { return "create collection" }
func (*DropCollection) Verb() string   { return "drop collection" }
func (*CreateIndex) Verb() string      { return "create index" }
func (*Put) Verb() string              { return "put" }
func (*Insert) Verb() string           { return "insert" }
func (*Set) Verb() string              { return "set" }
func (*Del) Verb() string              { return "del" }
func (*Get) Verb() string              { return "get" }
func (*Compact) Verb() string          { return "compact" }

func (*CreateCollection) stmtNode() {}
func (*DropCollection) stmtNode()   {}
func (*Compact) stmtNode()          {}
func (*CreateIndex) stmtNode()      {}
func (*Put) stmtNode()              {}
func (*Insert) stmtNode()           {}
func (*Set) stmtNode()              {}
func (*Del) stmtNode()              {}
func (*Get) stmtNode()              {}

func (*Literal) exprNode()   {}
func (*Param) exprNode()     {}
func (*Field) exprNode()     {}
func (*Now) exprNode()       {}
func (*ListLit) exprNode()   {}
func (*ObjectLit) exprNode() {}
func (*Unary) exprNode()     {}
func (*Binary) exprNode()    {}
func (*Regex) exprNode()     {}
func (*In) exprNode()        {}
func (*IsNull) exprNode()    {}
