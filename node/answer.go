package node

// What answers hold, and how a read's rows are written.
//
//   - A lone read (POST /query with a get, GET /t/<t>/<coll>, the admin
//     read route) finds its rows under the tenant's read lock and gives it
//     back; its rows are encoded after, piece by piece, each piece written
//     before the next is made (engine.ReadStream, writeRows). An answer
//     that fits in one piece goes out whole with its length, as before; a
//     longer one goes out chunked, under the write deadline rules every
//     long answer has (respWriter: a client taking no byte for
//     --body-timeout is cut). A client that reads nothing holds no lock,
//     only what the answer holds: a piece, and 8 bytes a row.
//   - Every answer is charged to the node's budget (--max-answer-memory)
//     for what it holds, from before its statement runs until its handler
//     returns: a piece, the rows found (8 bytes each), any row built whole
//     (a lookup's, a group's, a block's) and a block's rendered answer. A
//     read that finds the budget spent is refused 503 with Retry-After
//     before it runs, or, if the rows it found pass what is left, before
//     its first byte; it never waits. An answer that alone would pass the
//     whole budget is refused 400 saying to give it a limit.
//   - A streamed answer never fails once its first byte is out: its rows
//     are found, and every error with them, before. If it cannot be
//     finished (the client stopped reading, the tenant goes, the node
//     stops) it is cut: the connection is closed without the chunked
//     body's end, so a client sees a truncated answer, never a short
//     array that looks whole.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/fenec-go/fenec/engine"
)

// answerPiece is how much of a streamed answer is encoded before it is
// written: rows are appended whole until a piece holds this much.
const answerPiece = 32 << 10

// answerBudget is the node's bound on the bytes answers hold at once.
type answerBudget struct {
	limit int64 // 0: no bound
	used  atomic.Int64
}

// take charges n bytes; past the bound it charges nothing and says why.
func (b *answerBudget) take(n int64) error {
	if b.limit <= 0 {
		b.used.Add(n)
		return nil
	}
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return ErrAnswerMemory
		}
		if b.used.CompareAndSwap(u, u+n) {
			return nil
		}
	}
}

func (b *answerBudget) give(n int64) { b.used.Add(-n) }

// answerHold is what one request's answer holds of the budget, given
// back as its handler returns.
type answerHold struct {
	b       *answerBudget
	n       int64
	refused *atomic.Int64 // the node's count of answers refused (metrics)
}

// take charges n more bytes to the request's answer: ErrAnswerTooLarge
// when the answer would hold more than the whole budget alone,
// ErrAnswerMemory when the budget has no room for it now. Not safe for
// concurrent use: a request's statements run one at a time.
func (h *answerHold) take(n int64) error {
	if h.b.limit > 0 && h.n+n > h.b.limit {
		h.refused.Add(1)
		return ErrAnswerTooLarge
	}
	if err := h.b.take(n); err != nil {
		h.refused.Add(1)
		return err
	}
	h.n += n
	return nil
}

// force charges n more bytes even past the node's budget (a block that
// writes: slow readers never cost a writer its write); only an answer
// that alone would hold more than the whole budget is refused.
func (h *answerHold) force(n int64) error {
	if h.b.limit > 0 && h.n+n > h.b.limit {
		h.refused.Add(1)
		return ErrAnswerTooLarge
	}
	h.b.used.Add(n)
	h.n += n
	return nil
}

// release gives back everything the request's answer held.
func (h *answerHold) release() {
	h.b.give(h.n)
	h.n = 0
}

// held is the request's hold on the budget, made on first use.
func (c *call) held() *answerHold {
	if c.ans == nil {
		c.ans = &answerHold{b: c.s.answers, refused: &c.s.answersRefused}
	}
	return c.ans
}

// readRows runs a lone read for its rows to be written by writeRows: a
// piece of the budget taken before it runs (refused, nothing runs), the
// statement bounded by --max-statement-time and stopped with the request,
// and what it finds charged as it finds it.
func (c *call) readRows(st engine.Statement) (*engine.Result, uint64, error) {
	if err := c.held().take(answerPiece); err != nil {
		return nil, c.t.db.Seq(), err
	}
	ctx, cancel := c.s.reg.statementContext(c.r.Context())
	defer cancel()
	return c.t.db.ReadStream(ctx, st, engine.ReadOptions{Charge: c.held().take})
}

// writeRows writes a read's answer: whole with its length when it fits in
// one piece (or is no rows), else chunked as it is encoded, a piece at a
// time, the buffer charged for the largest row it may hold before the
// first byte goes (refused, the request is answered 503 instead). An
// answer that cannot be finished is cut (cutAnswer).
func (c *call) writeRows(res *engine.Result) {
	if res.Kind != engine.ResultRows {
		writeRaw(c.w, http.StatusOK, res.JSON())
		return
	}
	enc := res.Encoder()
	if err := c.held().take(int64(enc.RowBound())); err != nil {
		c.fail(err)
		return
	}
	b, done := enc.Next(pieceBuffer(enc), answerPiece)
	if err := enc.Err(); err != nil { // a mapped document could not be read
		c.fail(err)
		return
	}
	if done {
		writeRaw(c.w, http.StatusOK, b)
		return
	}
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(http.StatusOK)
	defer c.cutWhenGone()()
	if err := c.writePieces(enc, b, done, []byte{'\n'}); err != nil {
		cutAnswer()
	}
}

// pieceBuffer is a buffer for enc's pieces: a piece and the largest row
// it may end with, what the answer was charged for it, so that it never
// grows as rows are appended.
func pieceBuffer(enc *engine.RowsEncoder) []byte {
	return make([]byte, 0, answerPiece+enc.RowBound())
}

// writePieces writes b, a first piece of enc's array (done: its last;
// b from pieceBuffer), then every next piece as it is encoded, then tail.
// The buffer grows only for a row longer than the bound it was made for:
// rows built whole (charged as they were built, their bound unknown) are
// charged what it grew whatever the budget holds, a row past its bound
// (which should hold every row) is charged, or the writing ends with the
// budget's refusal.
func (c *call) writePieces(enc *engine.RowsEncoder, b []byte, done bool, tail []byte) error {
	held := int64(cap(b))
	for {
		if err := enc.Err(); err != nil {
			return err // the rows ended unclosed: cut, not finished
		}
		if _, err := c.w.Write(b); err != nil {
			return err
		}
		if done {
			_, err := c.w.Write(tail)
			return err
		}
		b, done = enc.Next(b[:0], answerPiece)
		if grew := int64(cap(b)) - held; grew > 0 {
			held += grew
			if enc.RowBound() == 0 {
				_ = c.held().force(grew)
				continue
			}
			if err := c.held().take(grew); err != nil {
				c.log.Warn("streamed answer cut: a row past its bound found no room in --max-answer-memory", "route", c.route)
				return err
			}
		}
	}
}

// cutAnswer ends a streamed answer that cannot be finished: net/http
// closes the connection without the chunked body's end, so the client
// sees a truncated body, never an array that looks whole.
func cutAnswer() { panic(http.ErrAbortHandler) }

// stoppedAnswer counts a statement of c stopped part way by why, logs one
// stopped at its time bound with its tenant (what an operator looks for),
// and returns what it is answered with: err itself, whose cause says why
// (its time bound, answered 503 saying what to do; a tenant going or the
// node stopping), or, for a client gone, err marked so (499, read by no
// one). err keeps what it was wrapped in (a /batch's line). Any other
// error is returned as it is.
func (c *call) stoppedAnswer(err error) error {
	if !errors.Is(err, engine.ErrStopped) {
		return err
	}
	reason := "tenant"
	switch {
	case errors.Is(err, ErrStatementTime):
		reason = "time"
		tenant := ""
		if c.t != nil {
			tenant = c.t.name
		}
		c.log.Warn("statement stopped at --max-statement-time", "tenant", tenant, "route", c.route, "bound", c.s.reg.stmtTime)
	case errors.Is(err, context.Canceled):
		reason, err = "client", fmt.Errorf("%w (%w)", ErrClientGone, err)
	}
	c.s.metrics.cancelled.WithLabelValues(reason).Inc()
	return err
}
