package node

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/fenec-go/fenec/wire"
)

// admin serves /_admin/: it needs the admin token, and without
// --admin-token the whole tree answers 404.
func (c *call) admin(rest []string) {
	c.route = "admin"
	admin := c.s.tokens().admin
	if admin == "" {
		c.fail(ErrNoRoute)
		return
	}
	if !c.clientCertOK() || !c.authorize(surfaceAdmin, admin, "") {
		return
	}
	if len(rest) == 1 && rest[0] == "node" {
		c.route = "admin_node" // asked by id, never refused for it (identity.go)
		c.adminNode()
		return
	}
	if !c.meantForMe() {
		return
	}
	switch {
	case len(rest) == 1 && rest[0] == "stats":
		c.route = "admin_stats"
		if c.method(http.MethodGet) {
			c.adminStats()
		}
	case len(rest) == 1 && rest[0] == "tenants":
		c.route = "admin_tenants"
		if c.method(http.MethodGet) {
			c.adminList()
		}
	case len(rest) == 1 && rest[0] == "sizes":
		c.route = "admin_sizes"
		if c.method(http.MethodGet) {
			c.adminSizes()
		}
	case len(rest) == 1 && rest[0] == "lease":
		c.serveLease()
	case len(rest) == 1 && rest[0] == "promote":
		c.route = "admin_promote_many"
		if c.method(http.MethodPost) {
			c.adminPromoteMany() // promote_many.go
		}
	case len(rest) >= 2 && rest[0] == "tenants":
		c.adminTenant(rest[1], rest[2:])
	default:
		c.fail(ErrNoRoute)
	}
}

// adminTenant serves /_admin/tenants/<t>[/...].
func (c *call) adminTenant(name string, rest []string) {
	if !wire.ValidName(name) {
		c.fail(fmt.Errorf("%w: %q", ErrBadName, name))
		return
	}
	switch {
	case len(rest) == 0:
		c.route = "admin_tenant"
		if !c.method(http.MethodPut, http.MethodDelete) {
			return
		}
		if c.r.Method == http.MethodPut {
			c.adminChange("create", name, http.StatusCreated, func() error { return c.s.reg.create(name) })
		} else {
			c.adminDelete(name)
		}
	case len(rest) == 1 && (rest[0] == "freeze" || rest[0] == "thaw"):
		c.route = "admin_" + rest[0]
		if c.method(http.MethodPost) {
			c.adminFreeze(name, rest[0] == "freeze")
		}
	case len(rest) == 1 && rest[0] == "promote":
		c.route = "admin_promote"
		if c.method(http.MethodPost) {
			c.adminPromote(name)
		}
	case len(rest) == 1 && rest[0] == "follow":
		c.route = "admin_follow"
		if c.method(http.MethodPost) {
			c.adminFollow(name)
		}
	case len(rest) == 1 && rest[0] == "read":
		c.route = "admin_read"
		if c.method(http.MethodPost) {
			c.adminRead(name)
		}
	case len(rest) == 1 && rest[0] == "compact":
		c.route = "admin_compact"
		if c.method(http.MethodPost) {
			c.adminCompact(name) // compact.go
		}
	case len(rest) == 1 && rest[0] == "replication":
		c.route = "admin_replication"
		if c.method(http.MethodGet) {
			c.adminReplication(name)
		}
	case len(rest) == 1 && (rest[0] == "quota" || rest[0] == "usage"):
		c.adminQuota(name, rest[0] == "usage")
	case len(rest) == 1 && rest[0] == "file":
		c.route = "admin_file"
		if !c.method(http.MethodGet, http.MethodPut) {
			return
		}
		if c.r.Method == http.MethodGet {
			c.imageOut(name)
		} else {
			c.adminImageIn(name) // restore.go
		}
	default:
		c.fail(ErrNoRoute)
	}
}

// adminDelete serves DELETE /_admin/tenants/<t>: the tenant's file goes;
// with ?if=frozen only while it is open and frozen (a move's source a
// router left), else 412 and the file is kept.
func (c *call) adminDelete(name string) {
	q, err := c.queryValues()
	if err != nil {
		c.fail(err)
		return
	}
	switch v := q.Get("if"); v {
	case "":
		c.adminChange("delete", name, http.StatusNoContent, func() error {
			return c.s.reg.remove(name, ErrTenantGone, c.s.reg.deleteFiles)
		})
	case "frozen":
		c.adminChange("delete frozen", name, http.StatusNoContent, func() error {
			return c.s.reg.removeFrozen(name, c.s.reg.deleteFiles)
		})
	default:
		c.fail(fmt.Errorf("%w: if=%q: want frozen (delete the file only while it is frozen), or leave it out", ErrBadRequest, v))
	}
}

// adminChange runs a change, answers it and records it in the audit log.
func (c *call) adminChange(what, name string, okStatus int, do func() error) {
	if err := do(); err != nil {
		c.fail(err)
		c.s.auditf(c, what, name, err.Error())
		return
	}
	if okStatus == http.StatusNoContent {
		c.w.WriteHeader(okStatus)
	} else {
		writeJSON(c.w, okStatus, wire.TenantChanged{Tenant: name})
	}
	c.s.auditf(c, what, name, "")
	c.log.Info("admin change", "what", what, "tenant", name)
}

// adminFreeze freezes (writes answer 503, those in flight finish before
// this answers) or thaws a tenant. A freeze holds the tenant open.
func (c *call) adminFreeze(name string, freeze bool) {
	what := map[bool]string{true: "freeze", false: "thaw"}[freeze]
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		c.s.auditf(c, what, name, err.Error())
		return
	}
	if freeze {
		if !t.freeze() {
			c.s.reg.release(t) // already frozen: that freeze holds it
		}
		if err := t.writes.wait(c.r.Context()); err != nil {
			c.fail(err)
			return
		}
	} else {
		if t.thaw() {
			c.s.reg.release(t) // the freeze's reference
		}
		c.s.reg.release(t)
	}
	writeJSON(c.w, http.StatusOK, wire.Frozen{Tenant: name, Frozen: freeze, Seq: t.db.Seq()})
	c.s.auditf(c, what, name, "")
	c.log.Info("admin change", "what", what, "tenant", name)
}

// imageOut streams the tenant's whole image. An error once bytes went
// out cuts the connection, so the copy is seen as cut short.
func (c *call) imageOut(name string) {
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	c.w.Header().Set("Content-Type", "application/octet-stream")
	n, err := t.db.WriteImage(c.w)
	if err != nil {
		if n == 0 && c.w.status == 0 {
			c.fail(fmt.Errorf("write image: %w", err))
			return
		}
		c.log.Error("write image", "tenant", name, "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// adminStats answers the node's totals.
func (c *call) adminStats() {
	sizes, err := c.s.reg.sizes()
	if err != nil {
		c.fail(err)
		return
	}
	var disk int64
	for _, n := range sizes {
		disk += n
	}
	writeJSON(c.w, http.StatusOK, wire.Stats{
		Tenants: len(sizes), Disk: disk, Memory: c.s.reg.memory(), Open: c.s.reg.openCount(),
	})
}

func (c *call) adminList() {
	names, err := c.s.reg.onDisk()
	if err != nil {
		c.fail(err)
		return
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(c.w, http.StatusOK, names)
}

func (c *call) adminSizes() {
	sizes, err := c.s.reg.sizes()
	if err != nil {
		c.fail(err)
		return
	}
	writeJSON(c.w, http.StatusOK, sizes)
}

// sizes is the bytes on disk of every tenant file.
func (r *registry) sizes() (map[string]int64, error) {
	names, err := r.onDisk()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(names))
	for _, n := range names {
		fi, err := os.Stat(r.pathOf(n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stat tenant: %w", err)
		}
		out[n] = fi.Size()
	}
	return out, nil
}
