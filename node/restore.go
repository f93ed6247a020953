package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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
//
// Before anything is written the image's first bytes are read: a stream
// that is not a fenec tenant file is refused there, and so is an image of
// another lineage than the tenant's (the one the router names, or the
// replaced file's) unless the restore is forced. An image past the
// tenant's bytes quota, or --max-image when it has none, is refused as
// that many bytes arrive (413), having written no more.
//
// The restored file starts a new history (engine.WriteRestart): at a seq
// past the replaced file's, its lineage the image's with a new history
// from the image's seq, and its id counters at least the replaced file's.
// So change cursors and Fenec-After/Fenec-History positions of the
// replaced file are refused (410, 504), and no id it gave is given again.
// The replaced file's marks are read once its writes are frozen (reads go
// on), so nothing it takes after is lost with the swap unseen.

// restoreMark is in the name of an image being verified beside its tenant.
const restoreMark = ".restore-"

// stagePath is a fresh name for an image of tenant name taken beside it.
func (r *registry) stagePath(name string) string {
	var b [8]byte
	rand.Read(b[:])
	return filepath.Join(r.dir, name+restoreMark+hex.EncodeToString(b[:]))
}

// restoreAsk is what a restore asks beside its image.
type restoreAsk struct {
	// lineage is the tenant's lineage as the router knows it (0: the
	// replaced file's, if there is one).
	lineage uint64
	// force takes an image of another lineage.
	force bool
	// maxImage bounds the image when the tenant has no bytes quota (0:
	// no bound).
	maxImage int64
}

// replaceImage installs the image read from src in tenant name's place,
// once it has been verified whole beside it, as a new history. It answers
// whether a live tenant was replaced (false: none was there, and one was
// created) and where the restored file starts.
func (r *registry) replaceImage(ctx context.Context, name string, src io.Reader, ask restoreAsk) (wire.Restored, error) {
	out := wire.Restored{Tenant: name}
	if !wire.ValidName(name) {
		return out, ErrBadName
	}
	old, err := r.acquireOld(ctx, name)
	if err != nil {
		return out, err
	}
	held := old != nil // a reference of ours on old, until the freeze takes it
	defer func() {
		if held {
			r.release(old)
		}
	}()
	body, head, err := engine.ReadImageHead(limitImage(src, name, imageBound(old, ask.maxImage)))
	if err != nil {
		return out, err
	}
	out.Lineage = head.LineageID()
	if err := checkLineage(name, head, old, ask); err != nil {
		return out, err
	}
	staged := r.stagePath(name)
	img, err := engine.InstallOpen(staged, body, engine.Options{NoSweep: true, Sync: engine.SyncOff, Logger: r.log})
	if err != nil {
		return out, err // nothing of the tenant was touched
	}
	defer os.Remove(staged)
	defer img.Close()
	var floor engine.Marks
	if old != nil {
		if !old.freeze() {
			return out, fmt.Errorf("%w: restore it once that ends", ErrFrozen)
		}
		held = false // the freeze holds our reference now; the swap lets it go
		if floor, err = r.restoreFloor(ctx, old); err != nil {
			return out, err
		}
	}
	restart := staged + ".restart"
	defer os.Remove(restart) // gone already once renamed into place
	res, err := img.WriteRestart(restart, floor)
	if err != nil {
		r.thawAfterRestore(old)
		return out, err
	}
	out.Seq, out.History = res.Seq, res.History
	var final engine.Marks
	err = r.removeAt(name, ErrTenantRestored, func(db *engine.DB) { final = db.Marks() }, func(path string) error {
		out.Replaced = true
		if !floor.Covers(final) { // a write landed past the freeze: start past it too
			os.Remove(restart)
			if res, err = img.WriteRestart(restart, final); err != nil {
				return err
			}
			out.Seq, out.History = res.Seq, res.History
		}
		if err := os.Rename(restart, path); err != nil {
			return fmt.Errorf("put the restored image in place: %w", err)
		}
		// The restored file is a primary's, as an install makes it; its
		// quota is the tenant's and stays.
		return errors.Join(syncDir(r.dir), r.dropFollow(name))
	})
	if !errors.Is(err, ErrUnknownTenant) {
		return out, err
	}
	return out, r.install(name, func(path string, t *tenant) (*engine.DB, error) {
		if err := os.Rename(restart, path); err != nil {
			return nil, fmt.Errorf("put the restored image in place: %w", err)
		}
		if err := syncDir(r.dir); err != nil {
			return nil, err
		}
		return engine.Open(path, t.options(false))
	})
}

// acquireOld holds the tenant a restore replaces (nil when there is
// none). One whose file does not open — damaged, the reason to restore it
// — is restored over all the same, with no marks to start past: logged.
func (r *registry) acquireOld(ctx context.Context, name string) (*tenant, error) {
	old, err := r.acquire(ctx, name)
	var damaged *engine.DamagedError
	switch {
	case err == nil:
		return old, nil
	case errors.Is(err, ErrUnknownTenant):
		return nil, nil
	case errors.As(err, &damaged):
		r.log.Warn("restoring over a tenant file that does not open: the restored file cannot start past its seq and ids",
			"tenant", name, "err", err)
		return nil, nil
	}
	return nil, err
}

// restoreFloor waits for the writes in flight on old, frozen (reads go
// on), and returns how far its file went; on an error it thaws it.
func (r *registry) restoreFloor(ctx context.Context, old *tenant) (engine.Marks, error) {
	if err := old.writes.wait(ctx); err != nil {
		r.thawAfterRestore(old)
		return engine.Marks{}, err
	}
	return old.db.Marks(), nil
}

// thawAfterRestore ends the freeze a restore put on old (nil: none) and
// lets go of the reference it held, the restore having failed before its
// swap: the tenant takes writes again, as it was.
func (r *registry) thawAfterRestore(old *tenant) {
	if old != nil && old.thaw() {
		r.release(old)
	}
}

// checkLineage refuses an image of another lineage than the tenant's,
// unless forced: it would put another tenant's rows in this one's place.
func checkLineage(name string, head engine.ImageHead, old *tenant, ask restoreAsk) error {
	want := ask.lineage
	if want == 0 && old != nil {
		want = lineageID(old.db.Lineage())
	}
	if want == 0 || ask.force || head.LineageID() == want {
		return nil
	}
	return &lineageError{tenant: name, image: head.LineageID(), want: want}
}

// lineageError is an image of another lineage than its tenant's.
type lineageError struct {
	tenant      string
	image, want uint64
}

func (e *lineageError) Error() string {
	return fmt.Sprintf("%s: the image is of lineage %d, tenant %s of lineage %d — it is another tenant's file, or one restored or "+
		"recreated since: check the file; to put it in %s's place all the same, send it again with force (?force=true, fenec restore --force)",
		ErrImageLineage.Error(), e.image, e.tenant, e.want, e.tenant)
}
func (e *lineageError) Unwrap() error { return ErrImageLineage }

// imageBound is the most bytes an image for old may have: its bytes
// quota when it has one, else maxImage (0: none).
func imageBound(old *tenant, maxImage int64) int64 {
	if old != nil {
		if q := old.quota.Load(); q != nil && q.Bytes > 0 {
			return q.Bytes
		}
	}
	return maxImage
}

// limitImage is src refusing to give more than bound bytes (0: no bound)
// for tenant name's image.
func limitImage(src io.Reader, name string, bound int64) io.Reader {
	if bound <= 0 {
		return src
	}
	return &imageLimit{r: src, tenant: name, bound: bound, left: bound}
}

// imageLimit reads an image up to its bound, then fails with an
// imageTooLarge.
type imageLimit struct {
	r      io.Reader
	tenant string
	bound  int64
	left   int64
}

func (l *imageLimit) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, &imageTooLarge{tenant: l.tenant, bound: l.bound}
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1] // one byte past the bound tells a larger image
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, &imageTooLarge{tenant: l.tenant, bound: l.bound}
	}
	return n, err
}

// imageTooLarge is an image past its bound.
type imageTooLarge struct {
	tenant string
	bound  int64
}

func (e *imageTooLarge) Error() string {
	return fmt.Sprintf("%s: more than %d bytes, the bound of tenant %s's image (its bytes quota, or the node's --max-image when it has none); "+
		"nothing was written past it and the tenant is as it was: raise the quota or --max-image, or compact the tenant before taking its image",
		ErrImageTooLarge.Error(), e.bound, e.tenant)
}
func (e *imageTooLarge) Unwrap() error { return ErrImageTooLarge }

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
		if what == "" || !wire.ValidName(name) || !e.Type().IsRegular() {
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
// from it in place (200; 201 when there was none); ?lineage=L names the
// tenant's lineage, ?force=true takes an image of another.
func (c *call) adminImageIn(name string) {
	q, err := c.queryValues()
	if err != nil {
		c.fail(err)
		return
	}
	ask := restoreAsk{maxImage: c.s.cfg.MaxImage}
	if ask.lineage, ask.force, err = restoreParams(q); err != nil {
		c.fail(err)
		return
	}
	switch v := q.Get("replace"); v {
	case "":
		c.adminChange("install", name, http.StatusCreated, func() error {
			body, _, err := engine.ReadImageHead(limitImage(c.body(), name, ask.maxImage))
			if err != nil {
				return err
			}
			return c.s.reg.installImage(name, body)
		})
		return
	case "true", "1":
	default:
		c.fail(fmt.Errorf("%w: replace=%q: want true, or leave it out to install a new tenant", ErrBadRequest, v))
		return
	}
	out, err := c.s.reg.replaceImage(c.r.Context(), name, c.body(), ask)
	if err != nil {
		c.failRestore(err)
		c.s.auditf(c, "restore", name, err.Error())
		return
	}
	status := http.StatusCreated
	if out.Replaced {
		status = http.StatusOK
	}
	writeJSON(c.w, status, out)
	detail := ""
	if ask.force {
		detail = "forced"
	}
	c.s.auditf(c, "restore", name, detail)
	c.log.Info("admin change", "what", "restore", "tenant", name, "replaced", out.Replaced,
		"seq", out.Seq, "history", out.History, "lineage", out.Lineage, "forced", ask.force)
}

// restoreParams reads ?lineage= and ?force= of an image put.
func restoreParams(q url.Values) (lineage uint64, force bool, err error) {
	if v := q.Get("lineage"); v != "" {
		if lineage, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, false, fmt.Errorf("%w: lineage=%q: want the tenant's lineage, a history id", ErrBadRequest, v)
		}
	}
	switch v := q.Get("force"); v {
	case "", "false", "0":
	case "true", "1":
		force = true
	default:
		return 0, false, fmt.Errorf("%w: force=%q: want true or false", ErrBadRequest, v)
	}
	return lineage, force, nil
}

// failRestore answers a refused restore; one of another lineage names
// both.
func (c *call) failRestore(err error) {
	var le *lineageError
	if errors.As(err, &le) {
		c.failWith(err, map[string]any{"lineage": le.image, "tenant_lineage": le.want})
		return
	}
	if errors.Is(err, ErrImageTooLarge) {
		c.w.Header().Set("Connection", "close") // the rest of the image is never read
	}
	c.fail(err)
}
