package node

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/fenec-go/fenec/wire"
)

// ident is a collection or field name of the query language.
var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// userColl says whether a path segment names a collection REST may use:
// the server's own ("_" first) and the node's routes are not.
func userColl(s string) bool {
	return ident.MatchString(s) && !strings.HasPrefix(s, "_")
}

// data serves /t/<tenant>/<rest...>. The tenant comes from the path
// only.
func (c *call) data(name string, rest []string) {
	if !wire.ValidName(name) {
		c.route = "data"
		c.fail(fmt.Errorf("%w: %q", ErrBadName, name))
		return
	}
	if len(rest) == 1 && rest[0] == "_health" {
		c.route = "health"
		c.health()
		return
	}
	h := c.dataRoute(rest)
	if h == nil {
		c.fail(ErrNoRoute)
		return
	}
	tok := c.s.tokens()
	want, surf := tok.data, surfaceData
	if c.route == "replication" {
		want, surf = tok.repl, surfaceReplication // the route is 404 without one
		if !c.clientCertOK() {
			return
		}
	}
	if !c.authorize(surf, want, name) {
		return
	}
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	if c.route != "subscribe" && c.route != "replication" { // streams have quotas of their own
		leave, err := t.enter()
		if err != nil {
			c.fail(err)
			return
		}
		defer leave()
	}
	c.t = t
	if c.route != "replication" && c.route != "subscribe" && !c.readAsked() { // staleness.go
		return
	}
	h()
}

// dataRoute picks the handler of a data route (nil: no such route) and
// names the route for metrics.
func (c *call) dataRoute(rest []string) func() {
	switch {
	case len(rest) == 1 && rest[0] == "query":
		c.route = "query"
		return func() {
			if c.method(http.MethodPost) {
				c.query()
			}
		}
	case len(rest) == 1 && rest[0] == "batch":
		c.route = "batch"
		return func() {
			if c.method(http.MethodPost) {
				c.batch()
			}
		}
	case len(rest) == 1 && rest[0] == "_changes":
		c.route = "changes"
		return func() {
			if c.method(http.MethodGet, http.MethodHead) {
				c.feed()
			}
		}
	case len(rest) == 1 && rest[0] == "_replication" && c.s.tokens().repl != "":
		c.route = "replication"
		return func() {
			if c.method(http.MethodGet) {
				c.replicationFeed()
			}
		}
	case len(rest) == 1 && userColl(rest[0]):
		c.route = "rest"
		return func() { c.rest(rest[0]) }
	case len(rest) == 2 && userColl(rest[0]) && rest[1] == "changes":
		c.route = "subscribe"
		return func() {
			if c.method(http.MethodGet) {
				c.subscribe(rest[0])
			}
		}
	}
	c.route = "unknown"
	return nil
}
