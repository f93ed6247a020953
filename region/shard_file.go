package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/fenec-go/fenec/global"
)

// holdRestore is the HeldBy of a tenant being restored through the router.
const holdRestore = "restore"

// getFile answers GET /_shard/tenants/<t>/file: the tenant's whole image,
// streamed from the node serving it (a backup of one tenant, with no need
// of the node's address or token). Any router answers it. An error once
// bytes went out cuts the connection, so the copy is seen cut short.
func (c *shardCall) getFile(name string) {
	if err := global.CheckName("tenant", name); err != nil {
		c.fail(err)
		return
	}
	v, err := c.view()
	if err != nil {
		c.fail(err)
		return
	}
	rec, ok := v.Tenant(name)
	if !ok {
		c.fail(fmt.Errorf("%w: %s", ErrUnknownTenant, name))
		return
	}
	n, ok := v.Node(rec.Node)
	if !ok {
		c.fail(fmt.Errorf("%w: %s (serving %s)", ErrUnknownNode, rec.Node, name))
		return
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), c.rt.cfg.MoveTimeout)
	defer cancel()
	img, size, err := c.rt.nodes.admin(n).Image(ctx, name)
	if err != nil {
		c.fail(fmt.Errorf("image of %s on %s: %w", name, rec.Node, nodeCallError(err)))
		return
	}
	defer img.Close()
	h := c.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Fenec-Node", rec.Node)
	if size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	c.w.WriteHeader(http.StatusOK)
	if b, err := io.Copy(c.w, img); err != nil {
		c.rt.log.Warn("tenant image cut short", "tenant", name, "node", rec.Node, "bytes", b, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// restoreAnswer is the answer of PUT /_shard/tenants/<t>/file.
type restoreAnswer struct {
	Tenant string `json:"tenant"`
	Node   string `json:"node"`
	Bytes  int64  `json:"bytes"`
	MS     int64  `json:"ms"`
}

// putFile restores a tenant in place from an image (PUT
// /_shard/tenants/<t>/file, on the leader): the image is taken whole
// first, so a client cut short changes nothing; then, the tenant held
// against moves and failovers and frozen on its node, its current image is
// kept aside, the file is deleted and the new image installed. If the
// install fails, the image kept aside is installed again. Its copies take
// the restored file from their primary as they follow it.
func (c *shardCall) putFile(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("tenant", name); err != nil {
		return 0, nil, err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.r.Context(), c.rt.cfg.MoveTimeout)
	defer cancel()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownTenant)
	}
	in, size, err := c.spoolBody()
	if err != nil {
		return 0, nil, err
	}
	defer removeSpool(in)
	held, err := s.Hold(ctx, name, at, holdRestore)
	if err != nil {
		return 0, nil, fmt.Errorf("hold %s for a restore: %w", name, err)
	}
	defer c.releaseHold(s, name, held)
	node, err := s.GetNode(ctx, held.Value.Node)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	if err := c.rt.restoreOn(ctx, node.Value, name, in); err != nil {
		return 0, nil, fmt.Errorf("restore %s on %s: %w", name, held.Value.Node, err)
	}
	c.rt.carryQuota(ctx, s, node.Value, held.Value.Node, name)
	c.rt.log.Info("tenant restored", "tenant", name, "node", held.Value.Node, "bytes", size)
	return http.StatusOK, restoreAnswer{Tenant: name, Node: held.Value.Node, Bytes: size,
		MS: time.Since(start).Milliseconds()}, nil
}

// restoreOn freezes the tenant on n, keeps its image aside, deletes it and
// installs in in its place; a failed install puts the kept image back.
func (rt *Router) restoreOn(ctx context.Context, n global.Node, name string, in *os.File) error {
	if err := rt.nodes.freeze(ctx, n, name, true); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	undo, err := rt.keepImage(ctx, n, name)
	if err != nil {
		_ = rt.nodes.freeze(context.WithoutCancel(ctx), n, name, false)
		return fmt.Errorf("keep the current image aside: %w", err)
	}
	defer removeSpool(undo)
	if _, err := rt.nodes.remove(ctx, n, name); err != nil {
		_ = rt.nodes.freeze(context.WithoutCancel(ctx), n, name, false)
		return fmt.Errorf("delete the current file: %w", err)
	}
	ierr := rt.nodes.imageIn(ctx, n, name, in)
	if ierr == nil {
		return nil
	}
	// Put the kept image back, whatever became of the request's context.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.cfg.MoveTimeout)
	defer cancel()
	_, _ = rt.nodes.remove(bctx, n, name) // a half-installed file, if any
	if _, err := undo.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("install: %w; and the kept image could not be read again (%v): the tenant has no file on its node", ierr, err)
	}
	if err := rt.nodes.imageIn(bctx, n, name, undo); err != nil {
		return fmt.Errorf("install: %w; and the kept image could not be put back (%v): the tenant has no file on its node", ierr, err)
	}
	return fmt.Errorf("install: %w (the tenant's file is as it was)", ierr)
}

// keepImage copies the tenant's current image into a temporary file.
func (rt *Router) keepImage(ctx context.Context, n global.Node, name string) (*os.File, error) {
	img, err := rt.nodes.imageOut(ctx, n, name)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	f, err := os.CreateTemp("", "fenec-restore-undo-*")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, img); err != nil {
		removeSpool(f)
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		removeSpool(f)
		return nil, err
	}
	return f, nil
}

// spoolBody copies the request's body into a temporary file, read back from
// its start; a body shorter than its Content-Length is refused.
func (c *shardCall) spoolBody() (*os.File, int64, error) {
	f, err := os.CreateTemp("", "fenec-restore-*")
	if err != nil {
		return nil, 0, fmt.Errorf("spool the image: %w", err)
	}
	n, err := io.Copy(f, c.r.Body)
	if err == nil && c.r.ContentLength >= 0 && n != c.r.ContentLength {
		err = fmt.Errorf("image cut short: %d of %d bytes", n, c.r.ContentLength)
	}
	if err == nil && n == 0 {
		err = errors.New("empty image: send the tenant's image (fenec backup) as the body")
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		removeSpool(f)
		return nil, 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return f, n, nil
}

// releaseHold ends the restore's hold, reading the record again if another
// change (a failover waiting on the hold marks it) landed meanwhile.
func (c *shardCall) releaseHold(s *global.Store, name string, at global.Versioned[global.Tenant]) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.r.Context()), c.rt.cfg.NodeTimeout)
	defer cancel()
	for range 3 {
		if _, err := s.Release(ctx, name, at, holdRestore); err == nil || !errors.Is(err, global.ErrConflict) {
			if err != nil {
				c.rt.log.Error("restore hold not released", "tenant", name, "err", err)
			}
			return
		}
		cur, err := s.GetTenant(ctx, name)
		if err != nil {
			c.rt.log.Error("restore hold not released", "tenant", name, "err", err)
			return
		}
		at = cur
	}
	c.rt.log.Error("restore hold not released after three tries", "tenant", name)
}

// removeSpool closes and removes a temporary file.
func removeSpool(f *os.File) {
	if f == nil {
		return
	}
	f.Close()
	os.Remove(f.Name())
}
