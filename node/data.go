package node

import (
	"fmt"
	"net/http"
	"regexp"
)

// ident is a collection or field name of the query language.
var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// data serves /t/<tenant>/<rest...>. The tenant comes from the path
// only.
func (c *call) data(name string, rest []string) {
	if !validName(name) {
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
	if !c.authorize(c.s.cfg.HTTPToken, name) {
		return
	}
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	if c.route != "subscribe" { // streams have a quota of their own
		leave, err := t.enter()
		if err != nil {
			c.fail(err)
			return
		}
		defer leave()
	}
	c.t = t
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
			if c.method(http.MethodGet) {
				c.feed()
			}
		}
	case len(rest) == 1 && ident.MatchString(rest[0]):
		c.route = "rest"
		return func() { c.rest(rest[0]) }
	case len(rest) == 2 && ident.MatchString(rest[0]) && rest[1] == "changes":
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
