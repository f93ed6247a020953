package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fenec-go/fenec/engine"
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
	// batch: a failure answers {"error", "completed", "at"}.
	batch bool
}

// queryBody is one /query request, and one line of a /batch.
type queryBody struct {
	Query  string `json:"query"`
	Params []any  `json:"params"`
}

// decodeQuery parses one {"query", "params"} object, numbers kept exact.
func decodeQuery(b []byte) (engine.Statement, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var q queryBody
	if err := dec.Decode(&q); err != nil {
		return engine.Statement{}, fmt.Errorf("%w: invalid JSON: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return engine.Statement{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadRequest)
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
	for i, line := range bytes.Split(body, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		st, err := decodeQuery(line)
		if err != nil {
			c.failWith(fmt.Errorf("line %d: %w", i+1, err), map[string]any{"completed": 0, "at": len(sts)})
			return
		}
		sts = append(sts, st)
	}
	if len(sts) == 0 {
		c.fail(fmt.Errorf("%w: empty batch", ErrBadRequest))
		return
	}
	for _, st := range sts {
		if k, err := c.t.db.Kind(st.Query); err == nil && k.Verb == "compact" {
			c.batchEach(sts) // compact.go
			return
		}
	}
	c.runJob(&job{sts: sts, holdable: true, batch: true, render: renderBatch}, body)
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
	out := c.t.runJob(c.r.Context(), j, k, false)
	c.answer(j, out)
}

// outcome is what running a job came to.
type outcome struct {
	res    *engine.BatchResult
	err    error
	status int
	body   []byte
}

// failJob answers a block's failure; a /batch names the statement.
func (c *call) failJob(j *job, err error) {
	var be *engine.BatchError
	if j.batch && errors.As(err, &be) {
		c.failWith(be, map[string]any{"completed": be.Completed, "at": be.At})
		return
	}
	if errors.As(err, &be) {
		err = be.Err
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
