package node

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// adminRead serves POST /_admin/tenants/<t>/read {"query", "params"}: one
// statement, run only if it reads. It is how a router reads a tenant for
// an operator's cross-tenant read (POST /_shard/query): the router holds
// the admin token, not the tenant's data token, and never parses the
// query, so the node is where a statement that would write is refused —
// before anything runs, by the engine's own parse of it (DB.Read), the
// statement checked being the statement run. The answer is the rows, with
// Fenec-Seq naming the tenant's seq the read saw.
//
// A refusal of the statement itself — it writes, it does not parse, its
// parameters do not fit — is the same on every tenant; it is answered 400
// with "statement_refused": true, which a router answers for the whole
// cross-tenant read.
func (c *call) adminRead(name string) {
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	c.t = t
	body, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	st, err := decodeQuery(body)
	if err != nil {
		c.failWith(err, map[string]any{"statement_refused": true})
		return
	}
	kind, _ := t.db.Kind(st.Query)
	c.s.countStatements([]engine.StatementKind{kind})
	res, seq, err := c.readRows(st)
	switch {
	case errors.Is(err, engine.ErrNotRead):
		c.failWith(fmt.Errorf("%w: this route runs reads only; send a write to the tenant itself (POST /t/%s/query or /batch)", err, name),
			map[string]any{"statement_refused": true, "verb": kind.Verb})
		return
	case statementRefused(err):
		c.failWith(err, map[string]any{"statement_refused": true})
		return
	case err != nil:
		c.fail(err)
		return
	}
	c.settledFor(seq)
	c.w.Header().Set(wire.HeaderSeq, strconv.FormatUint(seq, 10))
	c.writeRows(res)
}

// statementRefused says whether err refuses a statement's text or
// parameters, whatever tenant it is run on: it does not parse, or its
// parameters do not fit it.
func statementRefused(err error) bool {
	var pe *engine.ParseError
	return errors.As(err, &pe) || errors.Is(err, engine.ErrParams)
}
