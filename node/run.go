package node

import (
	"context"
	"errors"

	"github.com/fenec-go/fenec/engine"
)

// runJob runs j as one block on t. With k, the key and the answer land in
// the same block (unless holding and the claim took nothing: a held claim
// stores its key with the block that takes something).
//
// Its statements are bounded by --max-statement-time and stop with ctx; a
// block stopped lands nothing. What the answer holds is charged as it is
// made (j.hold): a lone read's piece before it runs and its rows as it
// finds them, a block's rows as they are built and its answer rendered.
// A read that finds the node's budget spent is refused; a block that
// writes is charged past it (its own answer is still bounded by the whole
// budget), so that slow readers never cost a writer its writes; and a
// landed write is answered whatever its answer holds, since refusing it
// then would hide that it landed.
func (t *tenant) runJob(ctx context.Context, j *job, k *keyed, holding bool) outcome {
	reqCtx := ctx // what follows a landed block is not the statement's to bound
	ctx, cancel := t.reg.statementContext(ctx)
	defer cancel()
	var (
		stored *storedAnswer
		opts   engine.BatchOptions
	)
	if k != nil {
		opts.Extra = func(rs []*engine.Result) []engine.Statement {
			if (holding && claimedNothing(rs)) || !anyWrite(rs) {
				return nil // a read, or a held claim that took nothing: no key kept
			}
			status, body := j.render(rs)
			var st engine.Statement
			stored, st = t.keyStatement(k, status, body, rs)
			return []engine.Statement{st}
		}
	}
	kinds := t.kinds(j.sts)
	t.reg.countStatements(kinds)
	if k == nil && len(j.sts) == 1 && kinds[0].ReadOnly {
		// A lone read needs no block: Read runs it under the read lock,
		// and would refuse it were it anything but a read; to stream, its
		// rows are left to encode as they are written.
		if j.stream && !holding {
			// A piece of the budget is taken before anything runs: with
			// none left, the read is refused having cost nothing.
			var charge func(int64) error
			if j.hold != nil {
				if err := j.hold.take(answerPiece); err != nil {
					return outcome{err: err}
				}
				charge = j.hold.take
			}
			res, seq, err := t.db.ReadStream(ctx, j.sts[0], engine.ReadOptions{Charge: charge})
			if err != nil {
				return outcome{err: err}
			}
			return outcome{res: &engine.BatchResult{Results: []*engine.Result{res}, Seq: seq}, rows: res}
		}
		res, seq, err := t.db.Read(ctx, j.sts[0])
		if err != nil {
			return outcome{err: err}
		}
		status, body := j.render([]*engine.Result{res})
		return outcome{res: &engine.BatchResult{Results: []*engine.Result{res}, Seq: seq}, status: status, body: body}
	}
	if j.hold != nil {
		opts.Charge = j.hold.take
		if !readsOnly(kinds) {
			opts.Charge = j.hold.force
		}
	}
	res, err := t.batch(ctx, j.sts, opts)
	if err != nil {
		if errors.Is(err, context.Canceled) && t.ctx.Err() != nil {
			err = context.Cause(t.ctx) // the tenant closed under a held request
		}
		return outcome{err: err}
	}
	if stored != nil {
		if stored.Seq != res.Seq {
			t.fixKeySeq(reqCtx, k.key, stored.Seq, res.Seq)
		}
		return outcome{res: res, status: stored.Status, body: stored.Body}
	}
	status, body := j.render(res.Results)
	if j.hold != nil {
		if res.Wrote {
			_ = j.hold.force(int64(len(body)))
		} else if err := j.hold.take(int64(len(body))); err != nil {
			return outcome{err: err}
		}
	}
	return outcome{res: res, status: status, body: body}
}

// kinds says what each statement does, as the engine's parse of it says
// (the parse is kept, so running them parses nothing again); one that
// does not parse has no kind, and fails as it runs.
func (t *tenant) kinds(sts []engine.Statement) []engine.StatementKind {
	out := make([]engine.StatementKind, len(sts))
	for i, st := range sts {
		out[i], _ = t.db.Kind(st.Query)
	}
	return out
}

// batch runs a block counted as a write in flight (what a freeze waits
// for), even if the engine panics.
func (t *tenant) batch(ctx context.Context, sts []engine.Statement, opts engine.BatchOptions) (*engine.BatchResult, error) {
	t.writes.add()
	defer t.writes.done()
	return t.db.Batch(ctx, sts, opts)
}

// readsOnly says whether every statement of a block only reads (one that
// does not parse counts as not).
func readsOnly(kinds []engine.StatementKind) bool {
	for _, k := range kinds {
		if !k.ReadOnly {
			return false
		}
	}
	return true
}

// anyWrite says whether a block holds a statement that writes.
func anyWrite(rs []*engine.Result) bool {
	for _, r := range rs {
		if r.Write {
			return true
		}
	}
	return false
}

// claimedNothing says whether a block's results are a claim that took
// nothing: some set/del took nothing and no statement wrote.
func claimedNothing(rs []*engine.Result) bool {
	claim := false
	for _, r := range rs {
		switch {
		case r.Claim:
			claim = true
		case r.Write && r.Kind == engine.ResultAffected && r.Affected == 0:
		case r.Write:
			return false
		}
	}
	return claim
}

// blockWrites counts the seq a block's statements move on by: one per
// document written or deleted and per schema change.
func blockWrites(rs []*engine.Result) uint64 {
	var n uint64
	for _, r := range rs {
		if !r.Write {
			continue
		}
		switch r.Kind {
		case engine.ResultAffected:
			n += uint64(r.Affected)
		case engine.ResultRows:
			n += uint64(len(r.Rows))
		case engine.ResultMessage:
			n++
		}
	}
	return n
}
