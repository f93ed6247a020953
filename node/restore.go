package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// Restoring a tenant in place: PUT /_admin/tenants/<t>/file?replace=true
// takes an image beside the live tenant, under a name of its own in the
// directory (<t>.restore-<random>), and verifies it there by replaying it
// whole. Only an image that passes replaces the live file, in one rename,
// with the tenant closed around the swap; a refused image leaves the
// tenant as it was, open and serving throughout. A tenant that is not
// there is created from the image, as a plain install would.

// restoreMark is in the name of an image being verified beside its tenant.
const restoreMark = ".restore-"

// stagePath is a fresh name for an image of tenant name taken beside it.
func (r *registry) stagePath(name string) string {
	var b [8]byte
	rand.Read(b[:])
	return filepath.Join(r.dir, name+restoreMark+hex.EncodeToString(b[:]))
}

// replaceImage installs the image read from src in tenant name's place,
// once it has been verified whole beside it. It reports whether a live
// tenant was replaced (false: none was there, and one was created).
func (r *registry) replaceImage(name string, src io.Reader) (bool, error) {
	if !validName(name) {
		return false, ErrBadName
	}
	staged := r.stagePath(name)
	if err := engine.Install(staged, src); err != nil {
		return false, err // nothing of the tenant was touched
	}
	defer os.Remove(staged) // gone already once renamed into place
	replaced := false
	err := r.remove(name, ErrTenantRestored, func(path string) error {
		replaced = true
		if err := os.Rename(staged, path); err != nil {
			return fmt.Errorf("put the restored image in place: %w", err)
		}
		// The restored file is a primary's, as an install makes it; its
		// quota is the tenant's and stays.
		return errors.Join(syncDir(r.dir), r.dropFollow(name))
	})
	if !errors.Is(err, ErrUnknownTenant) {
		return replaced, err
	}
	return false, r.install(name, func(path string, t *tenant) (*engine.DB, error) {
		if err := os.Rename(staged, path); err != nil {
			return nil, fmt.Errorf("put the restored image in place: %w", err)
		}
		if err := syncDir(r.dir); err != nil {
			return nil, err
		}
		return engine.Open(path, t.options(false))
	})
}

// removeStaged removes, as the node starts, the images it was taking when
// it stopped, none of them a tenant's only copy: one a restore was
// verifying beside the tenant; an install's side file (<t>.fenec.install:
// a move, a copy placed or a new tenant restored — the router put the
// tenant back or asks again, and a tenant file opened removes its own,
// but one never installed had nobody to); and the part of an image a copy
// was receiving from its primary (<t>.image.*.part: it asks again).
func (r *registry) removeStaged() {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, what := stagedImage(e.Name())
		if what == "" || !validName(name) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(r.dir, e.Name())); err == nil {
			r.log.Info("removed an image left as the node stopped", "tenant", name, "file", e.Name(), "by", what)
		}
	}
}

// stagedImage says whose image file is, and what left it (empty: not an
// image being taken).
func stagedImage(file string) (tenant, what string) {
	if name, _, ok := strings.Cut(file, restoreMark); ok {
		return name, "a restore"
	}
	if name, ok := strings.CutSuffix(file, fileExt+installExt); ok {
		return name, "an install"
	}
	if rest, ok := strings.CutSuffix(file, ".part"); ok {
		if name, _, ok := strings.Cut(rest, imagePartMark); ok {
			return name, "a copy's image from its primary"
		}
	}
	return "", ""
}

// installExt ends the side file an image is installed into (the store's
// name for it); imagePartMark is in the name of a copy's image as it
// arrives (follower.go).
const (
	installExt    = ".install"
	imagePartMark = ".image."
)

// adminImageIn serves PUT /_admin/tenants/<t>/file: a new tenant from the
// image (409 when it exists), or with ?replace=true the tenant restored
// from it in place (200; 201 when there was none).
func (c *call) adminImageIn(name string) {
	q, err := c.queryValues()
	if err != nil {
		c.fail(err)
		return
	}
	switch v := q.Get("replace"); v {
	case "":
		c.adminChange("install", name, http.StatusCreated, func() error {
			return c.s.reg.installImage(name, c.body())
		})
		return
	case "true", "1":
	default:
		c.fail(fmt.Errorf("%w: replace=%q: want true, or leave it out to install a new tenant", ErrBadRequest, v))
		return
	}
	replaced, err := c.s.reg.replaceImage(name, c.body())
	if err != nil {
		c.fail(err)
		c.s.auditf(c, "restore", name, err.Error())
		return
	}
	status := http.StatusCreated
	if replaced {
		status = http.StatusOK
	}
	writeJSON(c.w, status, wire.Restored{Tenant: name, Replaced: replaced})
	c.s.auditf(c, "restore", name, "")
	c.log.Info("admin change", "what", "restore", "tenant", name, "replaced", replaced)
}
