package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/fenec-go/fenec/engine/fql"
	"github.com/fenec-go/fenec/engine/store"
)

// kindBlock is the record kind of a block (every engine record).
const kindBlock = store.KindEngine

// DB is one open tenant file. Its methods are safe for concurrent use.
type DB struct {
	opts   Options
	logger *slog.Logger
	log    *store.Log

	mu       sync.RWMutex // guards st, watchers, nextW, closed; held for writing while a block lands
	st       *state
	watchers map[uint64]func(Change)
	nextW    uint64
	closed   bool

	stmts stmtCache

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

func (o *Options) storeOptions() store.Options {
	return store.Options{Sync: o.Sync, SyncEvery: o.SyncEvery, Logger: o.Logger, RetainBytes: o.RetainBytes}
}

func newDB(opts Options) *DB {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = time.Second
	}
	return &DB{opts: opts, logger: opts.Logger, st: newState(), watchers: make(map[uint64]func(Change))}
}

// Create makes a new, empty tenant file at path (it must not exist) and
// opens it.
func Create(path string, opts Options) (*DB, error) {
	db := newDB(opts)
	l, err := store.Create(path, opts.storeOptions())
	if err != nil {
		return nil, fmt.Errorf("create tenant: %w", storeErr(err))
	}
	db.log = l
	db.start()
	return db, nil
}

// Open opens an existing tenant file, taking an exclusive flock on it
// (a second opener gets ErrLocked), and replays it into memory.
func Open(path string, opts Options) (*DB, error) {
	db := newDB(opts)
	l, err := store.Open(path, opts.storeOptions(), db.replayer())
	if err != nil {
		return nil, fmt.Errorf("open tenant: %w", storeErr(err))
	}
	db.log = l
	if err := db.forkPastLost(); err != nil {
		l.Close()
		return nil, fmt.Errorf("open tenant: %w", storeErr(err))
	}
	db.start()
	return db, nil
}

// forkPastLost starts a file that lost writes at its tail past them
// (store.Log.ForkPast): a new history at a seq past every write it may
// have acknowledged, and each id counter moved on as far as the seq, so
// no seq and no id the lost writes were given is given again. A write
// gives at most one id of its own (an insert), so the lost writes gave no
// counter more ids than the seqs they took. Called from Open, before
// anything else can reach db.
func (db *DB) forkPastLost() error {
	bound, ok := db.log.Lost()
	if !ok {
		return nil
	}
	skip := bound + 1 - db.log.Seq()
	for name := range db.st.colls {
		if _, ok := db.st.counters[name]; !ok {
			db.st.counters[name] = 0 // it gave no id yet, but may have in the lost writes
		}
	}
	for name := range db.st.counters { // dropped collections' too
		db.st.counters[name] += int64(skip)
	}
	db.mu.RLock()
	st := db.st
	snap, err := db.snapshotLocked(nil)
	if err != nil {
		db.mu.RUnlock()
		return err
	}
	_, err = db.log.ForkPast(snap.write)
	var tabs map[string]*docTable
	if err == nil {
		tabs = db.mapImage(snap) // served from the file written, not the one it replaced
	}
	snap.wait()
	db.mu.RUnlock()
	if err != nil {
		return err // the store's says what failed
	}
	db.foldDocs(st, db.log.Seq(), tabs) // nothing else reaches db yet: the seq is the image's
	return nil
}

// replayer feeds the file's image and records into db.st.
func (db *DB) replayer() store.Replayer {
	var rp struct {
		t  txn
		op blockOp
	}
	return store.ReplayFuncs{
		OnImage: func(_ uint64, r io.Reader) error {
			st, err := readImage(r, db.logger)
			if err != nil {
				return err
			}
			db.st = st
			return nil
		},
		OnRecord: func(rec store.Record) error {
			if rec.Kind != kindBlock {
				return fmt.Errorf("unknown record kind %d", rec.Kind)
			}
			// A replay keeps no undo and no ops (a failure fails the
			// open), so one txn serves every record.
			rp.t = txn{st: db.st, replay: true}
			return applyBody(&rp.t, rec.Body, rec.N(), !rec.Borrowed, &rp.op)
		},
	}
}

// applyBody decodes a block into t, checking it holds exactly n writes; a
// failure undoes what t kept (nothing in a replay). With keep the
// documents point into body (it is theirs to keep); without, each copies
// its bytes out of it. op is scratch for the decoder.
func applyBody(t *txn, body []byte, n uint64, keep bool, op *blockOp) error {
	got, err := decodeOps(body, keep, op, t.apply)
	if err == nil && uint64(got) != n {
		err = fmt.Errorf("block holds %d writes, record says %d", got, n)
	}
	if err != nil {
		t.rollback()
		return fmt.Errorf("apply block: %w", err)
	}
	return nil
}

// storeErr maps the store's errors to the engine's: the store's closed
// log is the engine's closed tenant; the rest are the engine's already.
func storeErr(err error) error {
	if errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return err
}

func (db *DB) start() {
	if db.opts.NoSweep {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	db.cancel = cancel
	db.wg.Go(func() { db.sweepLoop(ctx) })
}

// Close syncs, stops the sweeper and releases the file. Safe to call twice.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		if db.cancel != nil {
			db.cancel()
		}
		db.wg.Wait()
		db.mu.Lock()
		db.closed = true
		db.releaseMappingsLocked()
		db.mu.Unlock()
		db.closeErr = db.log.Close()
	})
	return db.closeErr
}

func (db *DB) nowMs() int64 { return db.opts.Now().UnixMilli() }

// stmtCache keeps parsed statements by text: an AST is never changed
// after parsing, so one may serve many executions at once.
type stmtCache struct {
	mu sync.Mutex // guards m
	m  map[string]fql.Stmt
}

const (
	stmtCacheSize = 256  // statements kept; the cache starts over when full
	stmtCacheText = 4096 // longer statements are not kept
)

func (c *stmtCache) parse(q string) (fql.Stmt, error) {
	c.mu.Lock()
	stmt, ok := c.m[q]
	c.mu.Unlock()
	if ok {
		return stmt, nil
	}
	stmt, err := fql.Parse(q)
	if err != nil || len(q) > stmtCacheText {
		return stmt, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= stmtCacheSize {
		c.m = make(map[string]fql.Stmt)
	}
	c.m[q] = stmt
	c.mu.Unlock()
	return stmt, nil
}

// parseText parses one statement's text through the cache; a refusal is
// a *ParseError.
func (db *DB) parseText(q string) (fql.Stmt, error) {
	stmt, err := db.stmts.parse(q)
	if err != nil {
		var pe *fql.Error
		if errors.As(err, &pe) {
			out := &ParseError{Pos: pe.Pos, Msg: pe.Msg}
			if errors.Is(pe, fql.ErrTooMany) {
				out.Err = ErrTooMany
			}
			return nil, out
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return stmt, nil
}

// parse parses one statement and checks its parameters.
func (db *DB) parse(st Statement) (fql.Stmt, []any, error) {
	stmt, err := db.parseText(st.Query)
	if err != nil {
		return nil, nil, err
	}
	if n := fql.Params(stmt); n > len(st.Params) {
		return nil, nil, fmt.Errorf("%w: the statement uses $%d, %d given", ErrParams, n, len(st.Params))
	}
	params, err := fql.NormalizeParams(st.Params)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrParams, err)
	}
	return stmt, params, nil
}

// StatementKind is what a statement does, as its parse says.
type StatementKind struct {
	// Verb is the statement's leading keywords: "get", "put", "insert",
	// "set", "del", "create collection", "drop collection" or "create
	// index".
	Verb string
	// ReadOnly: the statement only reads (a get); it lands nothing.
	ReadOnly bool
}

// Kind parses query and says what it does; text that does not parse is
// its *ParseError. The parse is kept in the tenant's statement cache, so
// running the same text next parses nothing again.
func (db *DB) Kind(query string) (StatementKind, error) {
	stmt, err := db.parseText(query)
	if err != nil {
		return StatementKind{}, err
	}
	return StatementKind{Verb: stmt.Verb(), ReadOnly: stmt.ReadOnly()}, nil
}

// Read runs st if it only reads, under the read lock, and answers it with
// the seq it saw; any other statement is refused with ErrNotRead before
// anything runs. The text is parsed once: the statement checked is the
// statement run.
func (db *DB) Read(ctx context.Context, st Statement) (*Result, uint64, error) {
	stmt, params, err := db.parse(st)
	if err != nil {
		return nil, db.Seq(), err
	}
	if !stmt.ReadOnly() {
		return nil, db.Seq(), fmt.Errorf("%w: %s writes", ErrNotRead, stmt.Verb())
	}
	return db.read(ctx, stmt, params)
}

// read runs a statement that only reads under the read lock.
func (db *DB) read(ctx context.Context, stmt fql.Stmt, params []any) (*Result, uint64, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, 0, ErrClosed
	}
	r := &runner{st: db.st, params: params, now: db.nowMs(), stop: newStopper(ctx)}
	res, err := r.run(stmt)
	return res, db.log.Seq(), err
}

// Exec runs one statement as one block.
func (db *DB) Exec(ctx context.Context, st Statement) (*Result, uint64, error) {
	stmt, params, err := db.parse(st)
	if err != nil {
		return nil, db.Seq(), err
	}
	if _, ok := stmt.(*fql.Compact); ok {
		return db.compactStatement(ctx)
	}
	if !isWrite(stmt) {
		return db.read(ctx, stmt, params)
	}
	br, err := db.batch(ctx, []fql.Stmt{stmt}, [][]any{params}, BatchOptions{})
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) {
			err = be.Err
		}
		return nil, db.Seq(), err
	}
	return br.Results[0], br.Seq, nil
}

// Batch runs the statements as one block: all land or none does. On a
// failure it returns a *BatchError naming the statement.
func (db *DB) Batch(ctx context.Context, sts []Statement, opts BatchOptions) (*BatchResult, error) {
	stmts := make([]fql.Stmt, len(sts))
	params := make([][]any, len(sts))
	for i, st := range sts {
		var err error
		if stmts[i], params[i], err = db.parse(st); err != nil {
			return nil, &BatchError{At: i, Completed: 0, Err: err}
		}
		if _, ok := stmts[i].(*fql.Compact); ok && len(sts) > 1 {
			return nil, &BatchError{At: i, Completed: 0, Err: fmt.Errorf("%w: compact runs on its own, not in a block with other statements", ErrInvalid)}
		}
	}
	if len(stmts) == 1 {
		if _, ok := stmts[0].(*fql.Compact); ok {
			res, seq, err := db.compactStatement(ctx)
			if err != nil {
				return nil, &BatchError{At: 0, Completed: 0, Err: err}
			}
			return &BatchResult{Results: []*Result{res}, Seq: seq}, nil
		}
	}
	return db.batch(ctx, stmts, params, opts)
}

func (db *DB) batch(ctx context.Context, stmts []fql.Stmt, params [][]any, opts BatchOptions) (*BatchResult, error) {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	now := db.nowMs()
	t := &txn{st: db.st, now: now}
	bl := &blockLock{db: db, t: t}
	defer bl.release()
	results := make([]*Result, 0, len(stmts))
	fail := func(at int, err error) (*BatchResult, error) {
		t.rollback()
		bl.unlock()
		return nil, &BatchError{At: at, Completed: at, Err: err}
	}
	stop := newStopper(ctx)
	for i, stmt := range stmts {
		r := &runner{st: db.st, t: t, params: params[i], now: now, stop: stop, charge: opts.Charge}
		res, err := r.run(stmt)
		if err != nil {
			return fail(i, err)
		}
		results = append(results, res)
	}
	if opts.Extra != nil {
		for j, st := range opts.Extra(results) {
			stmt, p, err := db.parse(st)
			if err == nil {
				_, err = (&runner{st: db.st, t: t, params: p, now: now, stop: stop}).run(stmt)
			}
			if err != nil {
				return fail(len(stmts)+j, err)
			}
		}
	}
	seq, wrote, err := db.landLocked(t)
	bl.unlock()
	if err != nil {
		return nil, err
	}
	if wrote && db.opts.Sync == SyncAlways {
		if err := db.log.WaitDurable(context.WithoutCancel(ctx), seq); err != nil {
			return nil, fmt.Errorf("sync block: %w", storeErr(err))
		}
	}
	return &BatchResult{Results: results, Seq: seq, Wrote: wrote}, nil
}

// blockLock is the write lock held by a block being run (batch, Sweep).
type blockLock struct {
	db       *DB
	t        *txn
	unlocked bool
}

// unlock gives the lock back once the block is done with it.
func (l *blockLock) unlock() {
	l.unlocked = true
	l.db.mu.Unlock()
}

// release, deferred by whoever took the lock, acts only after a panic (a
// statement, the gate, the quota hook, Extra or a watcher): it undoes what
// did not land and gives the lock back, so the tenant is not wedged.
func (l *blockLock) release() {
	if l.unlocked {
		return
	}
	if !l.t.landed {
		l.t.rollback()
	}
	l.db.mu.Unlock()
}

// landLocked asks the gate and the quota, appends the block and tells the
// watchers; on any refusal it undoes the block. A body past
// store.SpillBytes goes into the file in pieces before the block lands,
// each asked of the quota first. Called with mu held.
func (db *DB) landLocked(t *txn) (uint64, bool, error) {
	if len(t.ops) == 0 {
		return db.log.Seq(), false, nil
	}
	body := encodeBlock(t.ops)
	n := uint64(len(t.ops))
	if db.opts.Gate != nil {
		if err := db.opts.Gate(); err != nil {
			t.rollback()
			return 0, false, &GateError{Err: err}
		}
	}
	spilled := false
	refuse := func(err error) (uint64, bool, error) {
		if spilled {
			if derr := db.log.DropSpills(); derr != nil {
				db.logger.Warn("drop spilled block", "err", derr)
			}
		}
		t.rollback()
		return 0, false, err
	}
	for len(body) > store.SpillBytes {
		piece := body[:store.SpillBytes]
		if err := db.askQuota(t, db.log.SpillSize(len(piece))); err != nil {
			return refuse(err)
		}
		if _, err := db.log.Spill(piece); err != nil {
			return refuse(fmt.Errorf("spill block: %w", storeErr(err)))
		}
		spilled = true
		body = body[store.SpillBytes:]
	}
	if err := db.askQuota(t, db.log.RecordSize(kindBlock, n, len(body))); err != nil {
		return refuse(err)
	}
	rec, err := db.log.AppendNoSync(kindBlock, n, body)
	if err != nil {
		return refuse(fmt.Errorf("append block: %w", storeErr(err)))
	}
	t.landed = true
	db.notifyLocked(rec.Last, t.ops)
	return rec.Last, true, nil
}

// askQuota asks the quota hook about record bytes the block adds.
func (db *DB) askQuota(t *txn, recordBytes int64) error {
	if db.opts.Quota == nil {
		return nil
	}
	err := db.opts.Quota(QuotaAsk{
		RecordBytes: recordBytes,
		FileBytes:   db.log.Size(),
		AddRows:     t.addRows,
		Rows:        db.st.rows - t.addRows,
		Rollback:    onlyTakesAway(t.ops),
	})
	if err != nil {
		return &QuotaError{Err: err}
	}
	return nil
}

func onlyTakesAway(ops []blockOp) bool {
	for i := range ops {
		if k := ops[i].kind; k != opDel && k != opDrop {
			return false
		}
	}
	return true
}

// CompileFilter compiles a where clause (the text after "where") for coll.
func (db *DB) CompileFilter(coll, where string, params []any) (Filter, error) {
	x, err := fql.ParseExpr(where)
	if err != nil {
		var pe *fql.Error
		if errors.As(err, &pe) {
			return nil, &ParseError{Pos: pe.Pos, Msg: pe.Msg}
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if n := fql.Params(x); n > len(params) {
		return nil, fmt.Errorf("%w: the clause uses $%d, %d given", ErrInvalid, n, len(params))
	}
	db.mu.RLock()
	c := db.st.colls[coll]
	db.mu.RUnlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownCollection, coll)
	}
	if err := checkFields(c, x); err != nil {
		return nil, err
	}
	p, err := fql.NormalizeParams(params)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &filter{x: x, params: p, now: db.opts.Now}, nil
}

// filter is a compiled where clause evaluated on answer rows.
type filter struct {
	x      fql.Expr
	params []any
	now    func() time.Time

	mu   sync.Mutex // guards sets
	sets map[*fql.In]*fql.ValueSet
}

func (f *filter) Match(doc Row) bool {
	v, err := fql.Eval(f.x, &mapEnv{row: doc, f: f})
	return err == nil && fql.Truthy(v)
}

type mapEnv struct {
	row Row
	f   *filter
}

func (e *mapEnv) Field(p []string) (any, bool) {
	v, ok := e.row[p[0]]
	for _, k := range p[1:] {
		m, isMap := v.(map[string]any)
		if !ok || !isMap {
			return nil, false
		}
		v, ok = m[k]
	}
	return normalizeParam(v), ok && v != nil
}

func (e *mapEnv) Param(n int) (any, error) {
	if n < 1 || n > len(e.f.params) {
		return nil, fmt.Errorf("%w: $%d", fql.ErrParam, n)
	}
	return e.f.params[n-1], nil
}

func (e *mapEnv) Now() int64 { return e.f.now().UnixMilli() }

// InSet and KeepInSet keep the filter's hashed in lists: the parameters
// are the filter's for its life, so each is hashed once.
func (e *mapEnv) InSet(x *fql.In) *fql.ValueSet {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	return e.f.sets[x]
}

func (e *mapEnv) KeepInSet(x *fql.In, s *fql.ValueSet) {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	if e.f.sets == nil {
		e.f.sets = make(map[*fql.In]*fql.ValueSet)
	}
	e.f.sets[x] = s
}

// Seq is the seq of the last landed write.
func (db *DB) Seq() uint64 { return db.log.Seq() }

// Durable is the highest seq known to be on disk.
func (db *DB) Durable() uint64 { return db.log.Durable() }

// DurableMoved returns a channel closed the next time Durable moves on,
// or the file fails or closes.
func (db *DB) DurableMoved() <-chan struct{} { return db.log.DurableMoved() }

// WaitDurable waits until seq is on disk (under SyncAlways it leads the
// sync itself): a read of a write not yet durable waits for it to be.
func (db *DB) WaitDurable(ctx context.Context, seq uint64) error {
	if db.log.Durable() >= seq {
		return nil
	}
	return storeErr(db.log.WaitDurable(ctx, seq))
}

// Sync forces everything landed to disk now.
func (db *DB) Sync() error { return storeErr(db.log.Sync()) }

// History is the current history id (the last lineage entry's).
func (db *DB) History() uint64 { return db.log.History() }

// Lineage returns a copy of the file's lineage, oldest first.
func (db *DB) Lineage() []LineageEntry {
	l := db.log.Lineage()
	out := make([]LineageEntry, len(l))
	for i, e := range l {
		out[i] = LineageEntry{History: e.History, From: e.From}
	}
	return out
}

// Holds says whether this file holds write seq of history h: h is on the
// lineage and seq is within what that history wrote here.
func (db *DB) Holds(h uint64, seq uint64) bool { return db.log.Holds(h, seq) }

// Fork starts a new history at the current seq (promotion), durably.
func (db *DB) Fork() (uint64, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return 0, ErrClosed
	}
	h, err := db.log.Fork()
	return h, storeErr(err)
}

// FileBytes is the size of the file, counted by the engine.
func (db *DB) FileBytes() int64 { return db.log.Size() }

// MemoryBytes estimates the memory the open tenant holds.
func (db *DB) MemoryBytes() int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	var n int64
	for _, c := range db.st.colls {
		n += c.memoryBytes()
	}
	return n
}

// Rows is the row count over collections not starting with "_".
func (db *DB) Rows() int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.st.rows
}
