package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/engine/fql"
	"github.com/fenec-go/fenec/internal/jsonerr"
)

// rest serves /t/<t>/<coll>: POST inserts, GET reads by filter, PATCH
// updates by filter, DELETE deletes by filter.
func (c *call) rest(coll string) {
	if !c.method(http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPatch, http.MethodDelete) {
		return
	}
	q, err := c.queryValues()
	if err != nil {
		c.fail(err)
		return
	}
	switch c.r.Method {
	case http.MethodGet, http.MethodHead: // net/http sends no body to a HEAD
		c.restGet(coll, q)
	case http.MethodPost:
		c.restInsert(coll)
	case http.MethodPatch:
		c.restUpdate(coll, q)
	case http.MethodDelete:
		c.restDelete(coll, q)
	}
}

func (c *call) restGet(coll string, q map[string][]string) {
	text, params, err := getStatement(coll, q)
	if err != nil {
		c.fail(err)
		return
	}
	if !c.awaitAfter() {
		return
	}
	st := engine.Statement{Query: text, Params: params}
	c.s.countStatements([]engine.StatementKind{{Verb: "get", ReadOnly: true}})
	res, seq, err := c.readRows(st)
	if err != nil {
		c.fail(built(err))
		return
	}
	if !c.settledRead(seq) {
		return
	}
	c.writeRows(res)
}

// restInsert inserts the body, an object or an array of objects.
func (c *call) restInsert(coll string) {
	body, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	docs, err := decodeDocs(body)
	if err != nil {
		c.fail(err)
		return
	}
	c.runJob(&job{
		sts:   []engine.Statement{{Query: "insert " + coll + " $1", Params: []any{docs}}},
		built: true,
		render: func(rs []*engine.Result) (int, []byte) {
			ids := rs[0].IDs
			if ids == nil {
				ids = []int64{}
			}
			b, _ := json.Marshal(map[string]any{"inserted": rs[0].Affected, "ids": ids})
			return http.StatusCreated, b
		},
	}, body)
}

// decodeDocs reads an object or an array of objects, numbers exact.
func decodeDocs(body []byte) (any, error) {
	var v any
	if err := jsonerr.Decode(body, &v, jsonerr.Numbers); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	switch x := v.(type) {
	case map[string]any:
	case []any:
		for i, e := range x {
			if _, ok := e.(map[string]any); !ok {
				return nil, fmt.Errorf("%w: element %d is not an object", ErrBadRequest, i)
			}
		}
	default:
		return nil, fmt.Errorf("%w: body must be an object or an array of objects", ErrBadRequest)
	}
	// Checked here, so that a number out of range is the body's fault in
	// the answer rather than a parameter's of the statement it becomes.
	n, err := fql.Normalize(v)
	if err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrBadRequest, err)
	}
	return n, nil
}

// restUpdate sets the body's fields on the rows the filter matches.
func (c *call) restUpdate(coll string, q map[string][]string) {
	body, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	var b stmtBuilder
	w, err := b.where(q)
	if err != nil {
		c.fail(err)
		return
	}
	if w == "" {
		c.fail(fmt.Errorf("%w: PATCH needs a filter", ErrBadRequest))
		return
	}
	doc, err := decodeDocs(body)
	if err != nil {
		c.fail(err)
		return
	}
	fields, ok := doc.(map[string]any)
	if !ok || len(fields) == 0 {
		c.fail(fmt.Errorf("%w: PATCH body must be an object of fields", ErrBadRequest))
		return
	}
	// The where clause's params come first; the set's follow.
	names := make([]string, 0, len(fields))
	for k := range fields {
		if !ident.MatchString(k) {
			c.fail(fmt.Errorf("%w: bad field %q", ErrBadRequest, k))
			return
		}
		names = append(names, k)
	}
	sort.Strings(names)
	sets := make([]string, len(names))
	for i, k := range names {
		sets[i] = k + ": " + b.param(fields[k])
	}
	text := "set " + coll + " {" + strings.Join(sets, ", ") + "} where " + w
	c.runJob(&job{
		sts:    []engine.Statement{{Query: text, Params: b.params}},
		render: affectedAs("updated"),
		built:  true,
	}, body)
}

// restDelete deletes the rows the filter matches.
func (c *call) restDelete(coll string, q map[string][]string) {
	var b stmtBuilder
	w, err := b.where(q)
	if err != nil {
		c.fail(err)
		return
	}
	if w == "" {
		c.fail(fmt.Errorf("%w: DELETE needs a filter", ErrBadRequest))
		return
	}
	c.runJob(&job{
		sts:    []engine.Statement{{Query: "del " + coll + " where " + w, Params: b.params}},
		render: affectedAs("deleted"),
		built:  true,
	}, nil)
}

// affectedAs answers {"<name>": affected}.
func affectedAs(name string) func([]*engine.Result) (int, []byte) {
	return func(rs []*engine.Result) (int, []byte) {
		return http.StatusOK, []byte(`{"` + name + `":` + strconv.FormatInt(rs[0].Affected, 10) + `}`)
	}
}
