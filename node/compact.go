package node

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// compact gives a tenant back the bytes its file holds for nothing (rows
// deleted or overwritten, dropped collections, the graphs in its tail):
// a statement of the query language, sent in /query or in a /batch, or
// POST /_admin/tenants/<t>/compact. It is not a block (it rewrites the
// file and lands nothing), so a /batch holding one runs its statements
// one by one, each its own block, in order.

// batchEach serves a /batch holding a compact: each statement runs on its
// own. All of them answer as a /batch does. A failure names the statement
// (completed, at); once an earlier statement landed, the failure says so
// with the seq and history of the last one that did, and a refusal that
// would tell the client to come back (503) is answered 500 with
// "outcome": "unknown" instead: what landed may not survive a failover,
// and is read back with Fenec-After and Fenec-History.
func (c *call) batchEach(sts []engine.Statement, lines []int) {
	switch {
	case len(c.r.Header.Values("Idempotency-Key")) > 0:
		c.failWith(fmt.Errorf("%w: a /batch holding a compact runs its statements one by one, so no key can be kept with them all: send the compact apart, or the batch without a key", ErrBadRequest),
			map[string]any{"completed": 0})
		return
	case c.r.Header.Get(wire.HeaderWait) != "":
		c.failWith(fmt.Errorf("%w: a /batch holding a compact is never held: send it without Fenec-Wait", ErrBadRequest),
			map[string]any{"completed": 0})
		return
	}
	if !c.awaitAfter() {
		return
	}
	j := &job{batch: true, lines: lines}
	results := make([]*engine.Result, 0, len(sts))
	var seq uint64    // the tenant's seq after the last statement
	var landed uint64 // the seq of the last statement that landed (0: none)
	for i, st := range sts {
		if f := c.s.reg.beforeEach.Load(); f != nil {
			(*f)(c.t.name, i)
		}
		out := c.t.runJob(c.r.Context(), &job{sts: []engine.Statement{st}, render: renderBatch}, nil, false)
		if out.err != nil {
			c.failEach(i, j.lineOf(i), landed, out.err)
			return
		}
		results = append(results, out.res.Results[0])
		seq = out.res.Seq
		if out.res.Wrote {
			landed = out.res.Seq
		}
	}
	status, body := renderBatch(results)
	res := &engine.BatchResult{Results: results, Seq: seq, Wrote: landed != 0}
	if res.Wrote {
		res.Seq = landed
	}
	c.answer(j, outcome{res: res, status: status, body: body})
}

// failEach answers the failure of statement at (on line of the body) in a
// /batch run one by one, after the statement that landed last at seq
// landed (0: none did). The at statements before it ran, each its own
// block: completed is at.
func (c *call) failEach(at, line int, landed uint64, err error) {
	var be *engine.BatchError
	if errors.As(err, &be) {
		err = be.Err
	}
	fields := batchRefusal(at, at, line)
	if landed == 0 {
		c.failWith(fmt.Errorf("line %d: %w", line, err), fields) // nothing landed: as a block's failure
		return
	}
	fields["seq"], fields["history"] = landed, c.t.db.History()
	if status, _ := statusOf(err); status == http.StatusServiceUnavailable {
		fields["outcome"] = "unknown"
		c.failWith(&partlyLanded{line: line, err: err}, fields)
		return
	}
	if !c.settleWrite(landed) { // what landed, as a write is answered
		return
	}
	c.failWith(fmt.Errorf("line %d: %w", line, err), fields)
}

// partlyLanded is a /batch run one by one whose statement on line was
// refused after earlier ones landed.
type partlyLanded struct {
	line int
	err  error
}

func (e *partlyLanded) Error() string {
	return fmt.Sprintf("line %d was refused (%v) after the statements before it landed: their outcome is unknown; read them back (Fenec-After and Fenec-History with the seq and history given) before sending the rest", e.line, e.err)
}

func (e *partlyLanded) Is(target error) bool { return target == ErrPartlyLanded }

// adminCompact serves POST /_admin/tenants/<t>/compact.
func (c *call) adminCompact(name string) {
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		c.s.auditf(c, "compact", name, err.Error())
		return
	}
	defer c.s.reg.release(t)
	before := t.db.FileBytes()
	res, _, err := t.db.Exec(c.r.Context(), engine.Statement{Query: "compact"})
	if err != nil {
		c.fail(err)
		c.s.auditf(c, "compact", name, err.Error())
		return
	}
	writeJSON(c.w, http.StatusOK, wire.Compacted{Tenant: name, Bytes: t.db.FileBytes(), Was: before, Message: res.Message})
	c.s.auditf(c, "compact", name, "")
	c.log.Info("admin change", "what", "compact", "tenant", name, "bytes", t.db.FileBytes(), "was", before)
}
