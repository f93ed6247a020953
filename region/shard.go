package region

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/audit"
	"github.com/fenec-go/fenec/internal/bodygap"
	"github.com/fenec-go/fenec/internal/jsonerr"
)

// maxShardBody bounds a /_shard/ request body.
const maxShardBody = 1 << 20

// shardCall is one /_shard/ request being answered.
type shardCall struct {
	rt   *Router
	w    http.ResponseWriter
	r    *http.Request
	what string // the operation, for the audit log
}

// serveShard routes /_shard/: the router token, then the route. Reads
// answer on every router; changes only on the leader.
func (rt *Router) serveShard(w http.ResponseWriter, r *http.Request) {
	if !rt.authorize(w, r) {
		return
	}
	c := &shardCall{rt: rt, w: w, r: r}
	seg := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/_shard/"), "/"), "/")
	switch {
	case len(seg) == 1 && seg[0] == "nodes":
		c.only(http.MethodGet, c.listNodes)
	case len(seg) == 2 && seg[0] == "nodes":
		switch r.Method {
		case http.MethodPut:
			c.change("put_node", "", seg[1], func(s *global.Store) (int, any, error) { return c.putNode(s, seg[1]) })
		case http.MethodDelete:
			c.change("delete_node", "", seg[1], func(s *global.Store) (int, any, error) { return c.deleteNode(s, seg[1]) })
		default:
			c.notAllowed(http.MethodPut, http.MethodDelete)
		}
	case len(seg) == 1 && seg[0] == "tenants":
		c.only(http.MethodGet, c.listTenants)
	case len(seg) == 2 && seg[0] == "tenants":
		switch r.Method {
		case http.MethodPut:
			c.change("place", seg[1], "", func(s *global.Store) (int, any, error) { return c.placeTenant(s, seg[1]) })
		case http.MethodDelete:
			c.change("delete_tenant", seg[1], "", func(s *global.Store) (int, any, error) { return c.deleteTenant(s, seg[1]) })
		default:
			c.notAllowed(http.MethodPut, http.MethodDelete)
		}
	case len(seg) == 3 && seg[0] == "tenants" && seg[2] == "move":
		c.only(http.MethodPost, func() {
			c.change("move", seg[1], "", func(s *global.Store) (int, any, error) { return c.moveTenant(s, seg[1]) })
		})
	case len(seg) == 1 && seg[0] == "promote":
		c.only(http.MethodPost, c.promote)
	case len(seg) == 3 && seg[0] == "nodes" && seg[2] == "failover":
		c.only(http.MethodPost, func() {
			c.change("failover", "", seg[1], func(s *global.Store) (int, any, error) { return c.postFailover(s, seg[1]) })
		})
	case len(seg) == 1 && seg[0] == "replicas":
		c.only(http.MethodPost, func() { c.change("replicas", "", "", c.postReplicas) })
	case len(seg) == 1 && seg[0] == "query":
		c.only(http.MethodPost, c.postQuery)
	case len(seg) == 3 && seg[0] == "tenants" && seg[2] == "quota":
		switch r.Method {
		case http.MethodPut:
			c.change("quota", seg[1], "", func(s *global.Store) (int, any, error) { return c.putQuota(s, seg[1]) })
		case http.MethodGet:
			c.getQuota(seg[1])
		default:
			c.notAllowed(http.MethodGet, http.MethodPut)
		}
	case len(seg) == 3 && seg[0] == "tenants" && seg[2] == "file":
		switch r.Method {
		case http.MethodGet:
			c.getFile(seg[1])
		case http.MethodPut:
			c.change("restore", seg[1], "", func(s *global.Store) (int, any, error) { return c.putFile(s, seg[1]) })
		default:
			c.notAllowed(http.MethodGet, http.MethodPut)
		}
	case len(seg) == 3 && seg[0] == "tenants" && seg[2] == "survive":
		c.only(http.MethodPut, func() {
			c.change("survive", seg[1], "", func(s *global.Store) (int, any, error) { return c.putSurvive(s, seg[1]) })
		})
	case len(seg) == 3 && seg[0] == "tenants" && seg[2] == "read-copies":
		c.only(http.MethodPut, func() {
			c.change("read_copies", seg[1], "", func(s *global.Store) (int, any, error) { return c.putReadCopies(s, seg[1]) })
		})
	case len(seg) == 1 && seg[0] == "regions":
		c.only(http.MethodGet, c.listRegions)
	case len(seg) == 3 && seg[0] == "regions" && seg[2] == "handoff":
		c.only(http.MethodPost, func() {
			c.changeAny("handoff", func(s *global.Store) (int, any, error) { return c.postHandoff(s, seg[1]) })
		})
	default:
		c.fail(ErrNoRoute)
	}
}

// regionEntry is a region as GET /_shard/regions lists it: who leases its
// nodes (global, region, or "" while a handoff is given and not yet
// taken), at which epoch and since when, the leasing side's router, term
// and longest-lease record, and the last handoff.
type regionEntry struct {
	Name          string          `json:"name"`
	Leaser        string          `json:"leaser"`
	Epoch         uint64          `json:"epoch"`
	Since         *time.Time      `json:"since,omitempty"`
	Router        string          `json:"router,omitempty"`
	Term          uint64          `json:"term,omitempty"`
	LeaseRecordMS int64           `json:"lease_record_ms"`
	Handoff       *global.Handoff `json:"handoff,omitempty"`
	Nodes         int             `json:"nodes"`
	// Mirrored: this router serves the region from its own directory,
	// linked to the global one (--global).
	Mirrored bool `json:"mirrored,omitempty"`
}

// listRegions answers every region the directory names (by a region
// record or a node recorded in it) and who leases it. Where this router's
// own directory leases the region, the term and record are its own.
func (c *shardCall) listRegions() {
	v, err := c.view()
	if err != nil {
		c.fail(err)
		return
	}
	names := map[string]int{}
	for name := range v.Regions() {
		names[name] += 0
	}
	for _, n := range v.Nodes() {
		names[n.Region]++
	}
	out := []regionEntry{}
	for name, nodes := range names {
		rec := v.RegionRecord(name)
		e := regionEntry{Name: name, Leaser: rec.LeasedBy(), Epoch: rec.Epoch, Router: rec.Router, Term: rec.Term,
			LeaseRecordMS: rec.LeaseRecordMS, Handoff: rec.Handoff, Nodes: nodes,
			Mirrored: c.rt.sides.mirroring() && name == c.rt.cfg.Region}
		if !rec.Since.IsZero() {
			since := rec.Since
			e.Since = &since
		}
		if rec.LeasedBy() == c.rt.sides.side() && (!c.rt.sides.mirroring() || name == c.rt.cfg.Region) {
			e.Router, e.Term, e.LeaseRecordMS = v.Leader.Router, v.Term, v.LeaseRecordMS
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b regionEntry) int { return cmpString(a.Name, b.Name) })
	cpJSON(c.w, http.StatusOK, out)
}

// only runs fn when the request has method m.
func (c *shardCall) only(m string, fn func()) {
	if c.r.Method != m {
		c.notAllowed(m)
		return
	}
	fn()
}

// notAllowed answers 405 with Allow naming the methods the route takes.
func (c *shardCall) notAllowed(methods ...string) {
	c.w.Header().Set("Allow", strings.Join(methods, ", "))
	c.fail(fmt.Errorf("%w: %s takes %s", ErrMethod, c.r.URL.Path, strings.Join(methods, " or ")))
}

// change runs a change on the leader with its fenced store, guarded on
// the region record of the tenant's or node's region (the side that
// leases a region takes its changes: owner.go), answers it, and records
// it (or its refusal) in the audit log.
func (c *shardCall) change(what, tenant, node string, fn func(*global.Store) (int, any, error)) {
	c.run(what, tenant, node, true, fn)
}

// changeAny is change for a change that is about who owns a region (a
// handoff): it needs the lead, not the region.
func (c *shardCall) changeAny(what string, fn func(*global.Store) (int, any, error)) {
	c.run(what, "", "", false, fn)
}

func (c *shardCall) run(what, tenant, node string, owned bool, fn func(*global.Store) (int, any, error)) {
	c.what = what
	var s *global.Store
	var err error
	if owned && c.rt.sides.mirroring() {
		// A region's router takes changes only while its region leases
		// its nodes, and never a far tenant's; refused before the lead is
		// looked at.
		if err = c.rt.sides.refuseFar(tenant); err == nil {
			err = c.rt.ownsOwnRegion()
		}
	}
	if err == nil {
		s, err = c.rt.lead.Changes(c.r.Context())
	}
	if err == nil && owned && node != "" {
		s, err = c.rt.sides.ownNode(c.r.Context(), s, node)
	}
	if err == nil && owned && tenant != "" {
		s, err = c.rt.sides.ownTenant(c.r.Context(), s, tenant)
	}
	code, body := 0, any(nil)
	if err == nil {
		code, body, err = fn(s)
		if err != nil {
			c.rt.lead.Lost(c.r.Context(), err)
		}
	}
	if err != nil {
		code = shardCode(err)
		c.fail(err)
	} else {
		cpJSON(c.w, code, body)
	}
	if m, ok := body.(moveAnswer); ok && node == "" {
		node = m.To
	}
	switch id := c.r.Header.Get("X-Request-Id"); {
	case err == nil:
		c.rt.log.Info("shard change", "what", what, "tenant", tenant, "node", node, "status", code, "request_id", id)
	case code < 500: // fail logged a 5xx
		c.rt.log.Info("shard change refused", "what", what, "tenant", tenant, "node", node, "status", code,
			"err", err, "request_id", id)
	}
	if err := c.rt.audit.Record(c.rt.auditOf(c.r, what, tenant, node, err, code)); err != nil {
		c.rt.log.Error("audit", "err", err)
	}
}

// fail answers err by the table.
func (c *shardCall) fail(err error) {
	code := shardCode(err)
	if code >= 500 {
		c.rt.log.Warn("shard request", "method", c.r.Method, "path", c.r.URL.Path, "status", code, "err", err,
			"request_id", c.r.Header.Get("X-Request-Id"))
	}
	cpError(c.w, err)
}

// decode reads the JSON body into v (an empty body leaves v as it is).
func (c *shardCall) decode(v any) error {
	b, err := io.ReadAll(io.LimitReader(bodygap.Reader(c.w, c.r.Body, c.rt.cfg.Forward.BodyTimeout), maxShardBody+1))
	if errors.Is(err, bodygap.ErrStalled) {
		c.w.Header().Set("Connection", "close") // what is left of it is never read
		return fmt.Errorf("%w: %w", ErrBodyStalled, err)
	}
	if err != nil {
		return fmt.Errorf("%w: read body: %w", ErrBadRequest, err)
	}
	if len(b) > maxShardBody {
		return fmt.Errorf("%w: body larger than %d bytes", ErrBadRequest, maxShardBody)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := jsonerr.Decode(b, v, jsonerr.KnownFields); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// view returns the router's copy of the directory; before its first list
// has arrived, ErrNotReady (503, asked again after Retry-After).
func (c *shardCall) view() (*global.View, error) {
	if v := c.rt.watcher.View(); v != nil {
		return v, nil
	}
	return nil, ErrNotReady
}

// promote makes this router the leader at the next term. A router that
// leads already says so and changes nothing, unless the body asks it to
// move its term on ({"again": true}).
func (c *shardCall) promote() {
	c.what = "promote"
	var req struct {
		Again bool `json:"again"`
	}
	if err := c.decode(&req); err != nil {
		c.fail(err)
		return
	}
	if leading, term := c.rt.lead.Status(); leading && !req.Again {
		cpJSON(c.w, http.StatusOK, map[string]any{"leader": c.rt.id, "term": term, "already": true})
		return
	}
	term, err := c.rt.lead.Promote(c.r.Context())
	code := http.StatusOK
	if err != nil {
		code = shardCode(err)
		c.fail(err)
	} else {
		cpJSON(c.w, code, map[string]any{"leader": c.rt.id, "term": term})
		if !c.rt.sides.mirroring() {
			c.rt.wg.Go(func() { c.rt.trust.SealClearNodes(c.rt.ctx, c.rt.dir) })
		}
		c.rt.recoverInBackground()
	}
	if aerr := c.rt.audit.Record(c.rt.auditOf(c.r, "promote", "", "", err, code)); aerr != nil {
		c.rt.log.Error("audit", "err", aerr)
	}
}

// auditOf describes one change or refusal.
func (rt *Router) auditOf(r *http.Request, what, tenant, node string, err error, code int) audit.Entry {
	e := audit.Entry{
		Time: rt.now(), Router: rt.id, Who: r.RemoteAddr, What: what, Tenant: tenant, Node: node,
		RequestID: r.Header.Get("X-Request-Id"), Outcome: "ok", Status: code,
	}
	if err != nil {
		e.Outcome = err.Error()
	}
	return e
}

func cmpString(a, b string) int { return strings.Compare(a, b) }
