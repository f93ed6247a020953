package node

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/jsonerr"
)

// job is one request's block: its statements and how its answer is made
// from their results.
type job struct {
	sts []engine.Statement
	// render makes the answer (also inside BatchOptions.Extra, before the
	// block lands, when a key stores it).
	render func(results []*engine.Result) (int, []byte)
	// holdable: Fenec-Wait may hold it (/query and /batch).
	holdable bool
	// batch: a failure answers {"error", "completed", "at", "line"}.
	batch bool
	// lines are a /batch's statements' lines in its body, counted from 1
	// as an editor counts them (blank lines too).
	lines []int
	// built: the node made the statement from a REST request's path and
	// query string; a parse error is answered without its offset.
	built bool
	// stream: a lone read's rows are written as they are encoded
	// (answer.go), not rendered by render.
	stream bool
	// hold is charged what the answer holds as it is made: the request's
	// hold on the node's budget (nil: not charged, as for a request held
	// by Fenec-Wait, run by the tenant's claim runner).
	hold *answerHold
}

// queryBody is one /query request, and one line of a /batch.
type queryBody struct {
	Query  string `json:"query"`
	Params []any  `json:"params"`
}

// decodeQuery parses one {"query", "params"} object, numbers kept exact;
// a key beside those two is refused, not ignored (a misspelt "params"
// would run the statement without them).
func decodeQuery(b []byte) (engine.Statement, error) {
	var q queryBody
	if err := jsonerr.Decode(b, &q, jsonerr.Numbers|jsonerr.KnownFields); err != nil {
		return engine.Statement{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if strings.TrimSpace(q.Query) == "" {
		return engine.Statement{}, fmt.Errorf("%w: \"query\" is required", ErrBadRequest)
	}
	return engine.Statement{Query: q.Query, Params: q.Params}, nil
}

// query serves POST /query: one statement.
func (c *call) query() {
	body, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	st, err := decodeQuery(body)
	if err != nil {
		c.fail(err)
		return
	}
	c.runJob(&job{
		sts:      []engine.Statement{st},
		holdable: true,
		stream:   true,
		render: func(rs []*engine.Result) (int, []byte) {
			return http.StatusOK, rs[0].JSON()
		},
	}, body)
}

// batch serves POST /batch: NDJSON, one /query body a line, all one block.
func (c *call) batch() {
	body, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	var sts []engine.Statement
	var lines []int
	for i, line := range bytes.Split(body, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		st, err := decodeQuery(line)
		if err != nil {
			c.failWith(fmt.Errorf("line %d: %w", i+1, err), batchRefusal(0, len(sts), i+1))
			return
		}
		sts = append(sts, st)
		lines = append(lines, i+1)
	}
	if len(sts) == 0 {
		c.fail(fmt.Errorf("%w: empty batch", ErrBadRequest))
		return
	}
	for _, st := range sts {
		if k, err := c.t.db.Kind(st.Query); err == nil && k.Verb == "compact" {
			c.batchEach(sts, lines) // compact.go
			return
		}
	}
	c.runJob(&job{sts: sts, holdable: true, batch: true, lines: lines, render: renderBatch}, body)
}

// batchRefusal is the outcome fields of a refused /batch: completed, the
// statements before the refused one that ran and landed (none, for a
// block: nothing of it lands); at, the refused statement's index from 0
// among the batch's statements; line, its line in the body from 1.
func batchRefusal(completed, at, line int) map[string]any {
	return map[string]any{"completed": completed, "at": at, "line": line}
}

// lineOf is the body line of a /batch's statement at.
func (j *job) lineOf(at int) int {
	if at >= 0 && at < len(j.lines) {
		return j.lines[at]
	}
	return at + 1
}

// renderBatch answers {"ok": N, "results": [...]}.
func renderBatch(rs []*engine.Result) (int, []byte) {
	var b bytes.Buffer
	b.WriteString(`{"ok":`)
	b.WriteString(strconv.Itoa(len(rs)))
	b.WriteString(`,"results":[`)
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r.JSON())
	}
	b.WriteString("]}")
	return http.StatusOK, b.Bytes()
}

// runJob runs a request's block with everything around it: Fenec-After,
// the idempotency key, Fenec-Wait, and the answer.
func (c *call) runJob(j *job, body []byte) {
	if !c.awaitAfter() {
		return
	}
	key, ok := c.idempotencyKey()
	if !ok {
		return
	}
	var k *keyed
	if key != "" {
		// A node whose lease lapsed refuses a keyed retry before it looks
		// the key up: the write may be on another primary now.
		if err := c.t.leaseCheck(); err != nil {
			c.fail(err)
			return
		}
		unlock, err := c.t.lockKey(c.r.Context(), key)
		if err != nil {
			c.fail(err)
			return
		}
		defer unlock()
		k = &keyed{key: key, hash: requestHash(c.r, body)}
		if c.replay(k) {
			return
		}
	}
	wait, ok := c.waitHeader()
	if !ok {
		return
	}
	if j.holdable && wait > 0 {
		c.hold(j, k, wait)
		return
	}
	j.hold = c.held()
	out := c.t.runJob(c.r.Context(), j, k, false)
	c.answer(j, out)
}

// outcome is what running a job came to.
type outcome struct {
	res    *engine.BatchResult
	err    error
	status int
	body   []byte
	// rows, for a lone read run to stream, is its answer to write as it
	// is encoded (writeRows), in place of status and body.
	rows *engine.Result
}

// failJob answers a block's failure; a /batch names the statement by
// its line, and lands nothing (completed 0).
func (c *call) failJob(j *job, err error) {
	var be *engine.BatchError
	if j.batch && errors.As(err, &be) {
		line := j.lineOf(be.At)
		c.failWith(fmt.Errorf("line %d: %w", line, be.Err), batchRefusal(0, be.At, line))
		return
	}
	if errors.As(err, &be) {
		err = be.Err
	}
	if j.built {
		err = built(err)
	}
	c.fail(err)
}

// countStatements counts statements by what their parse says they do.
func (s *Server) countStatements(kinds []engine.StatementKind) {
	for _, k := range kinds {
		s.metrics.statements.WithLabelValues(kindLabel(k)).Inc()
	}
}

// kindLabel folds a statement's kind into the metric's few labels; one
// that did not parse is "other".
func kindLabel(k engine.StatementKind) string {
	switch k.Verb {
	case "get", "put", "insert", "set", "del":
		return k.Verb
	case "create collection", "drop collection", "create index":
		return "ddl"
	case "compact":
		return k.Verb
	}
	return "other"
}
