package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/failover"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/wire"
)

// holdRestore is the HeldBy of a tenant being restored through the router
// (a failover ends it rather than wait: failover.HoldRestore).
const holdRestore = failover.HoldRestore

// headerPlacedOn, on a tenant's image the router streams, names the node
// it came from.
const headerPlacedOn = "Fenec-Placed-On"

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
		c.fail(&notFoundError{as: ErrUnknownTenant, name: name})
		return
	}
	n, ok := v.Node(rec.Node)
	if !ok {
		c.fail(fmt.Errorf("%w: %s (serving %s)", ErrUnknownNode, rec.Node, name))
		return
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), c.rt.cfg.MoveTimeout)
	defer cancel()
	img, size, err := c.rt.nodes.Admin(n).Image(ctx, name)
	if err != nil {
		c.fail(fmt.Errorf("image of %s on %s: %w", name, rec.Node, nodeapi.CallError(err)))
		return
	}
	defer img.Close()
	h := c.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set(headerPlacedOn, rec.Node)
	if size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	c.w.WriteHeader(http.StatusOK)
	if b, err := io.Copy(c.w, img); err != nil {
		c.rt.log.Warn("tenant image cut short", "tenant", name, "node", rec.Node, "bytes", b, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// restoreAnswer is the answer of PUT /_shard/tenants/<t>/file: where the
// restored file starts (its seq, the history it forked, its lineage).
type restoreAnswer struct {
	Tenant  string `json:"tenant"`
	Node    string `json:"node"`
	Bytes   int64  `json:"bytes"`
	MS      int64  `json:"ms"`
	Seq     uint64 `json:"seq"`
	History uint64 `json:"history"`
	Lineage uint64 `json:"lineage"`
}

// putFile restores a tenant in place from an image (PUT
// /_shard/tenants/<t>/file[?force=true], on the leader): the tenant held
// against moves meanwhile, the body is streamed to the tenant's node as a
// restore (PUT /_admin/tenants/<t>/file?replace=true, with the lineage
// the directory records), which refuses an image of another lineage
// unless forced, verifies the image whole beside the live tenant and
// swaps only then, as a new history. Writes the tenant took since the
// image was made are gone with the swap, as a restore means. The
// directory then records the restored file's lineage and the history it
// forked, which a failover's promotion is checked against. Its copies
// take the restored file from their primary as they follow it.
func (c *shardCall) putFile(s *global.Store, name string) (int, any, error) {
	if err := global.CheckName("tenant", name); err != nil {
		return 0, nil, err
	}
	force, err := forceParam(c.r)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	bounded, cancel := context.WithTimeout(c.r.Context(), c.rt.cfg.MoveTimeout)
	defer cancel()
	// A failover of the tenant's node cancels the restore (package region/failover).
	ctx, broken := context.WithCancelCause(bounded)
	defer broken(nil)
	defer c.rt.failover.Restoring(name, broken)()
	defer context.AfterFunc(ctx, func() {
		if errors.As(context.Cause(ctx), new(*failover.RestoreBroken)) {
			// The image's read, blocked on a client that sends slowly or
			// not at all, ends now, not at --body-timeout; what is left
			// of it is never read (the answer closes the connection).
			_ = http.NewResponseController(c.w).SetReadDeadline(time.Now())
		}
	})()
	at, err := s.GetTenant(ctx, name)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownTenant)
	}
	held, err := s.Hold(ctx, name, at, holdRestore)
	if err != nil {
		return 0, nil, fmt.Errorf("hold %s for a restore: %w", name, err)
	}
	defer func() { c.releaseHold(s, name, held) }()
	node, err := s.GetNode(ctx, held.Value.Node)
	if err != nil {
		return 0, nil, errNotFoundAs(err, ErrUnknownNode)
	}
	body := &countingBody{r: c.r.Body}
	ans, err := c.rt.nodes.Admin(node.Value).Restore(ctx, name, body, c.r.ContentLength,
		wire.RestoreOptions{Lineage: held.Value.Lineage, Force: force})
	var rb *failover.RestoreBroken
	switch {
	case errors.As(context.Cause(ctx), &rb):
		c.w.Header().Set("Connection", "close") // the rest of the image is never read
		return 0, nil, rb
	case body.err != nil && !errors.Is(body.err, io.EOF):
		return 0, nil, fmt.Errorf("%w: the image was cut short after %d bytes (%v): the tenant is as it was", ErrBadRequest, body.n, body.err)
	case err != nil:
		return 0, nil, restoreRefusal(name, held.Value.Node, err)
	}
	rec, err := s.UpdateTenant(ctx, name, held, func(t *global.Tenant) error {
		if t.HeldBy != holdRestore {
			return &failover.RestoreBroken{Tenant: name, Node: held.Value.Node}
		}
		t.Lineage, t.ForkedHistory = ans.Lineage, ans.History
		return nil
	})
	if errors.As(context.Cause(ctx), &rb) || errors.As(err, &rb) {
		return 0, nil, &failover.RestoreBroken{Tenant: name, Node: held.Value.Node}
	}
	if err != nil {
		return 0, nil, fmt.Errorf("tenant %s restored on %s, but the directory does not record its new lineage and history "+
			"(a failover may refuse its copy until it is restored again): %w", name, held.Value.Node, err)
	}
	held = rec
	c.settle(held.Rev)
	c.rt.log.Info("tenant restored", "tenant", name, "node", held.Value.Node, "bytes", body.n,
		"seq", ans.Seq, "history", ans.History, "lineage", ans.Lineage, "forced", force)
	return http.StatusOK, restoreAnswer{Tenant: name, Node: held.Value.Node, Bytes: body.n,
		MS: time.Since(start).Milliseconds(), Seq: ans.Seq, History: ans.History, Lineage: ans.Lineage}, nil
}

// forceParam reads ?force= of a restore.
func forceParam(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("force"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, fmt.Errorf("%w: force=%q: want true or false", ErrBadRequest, v)
	}
}

// restoreRefusal is the node's refusal of a restore as the router answers
// it: the image's own (400, 409 another lineage, 413 too large) with the
// node's words, anything else a failed node call (502). Either way the
// tenant is as it was.
func restoreRefusal(name, node string, err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		switch we.Status {
		case http.StatusBadRequest:
			return fmt.Errorf("%w by node %s: %s (the tenant is as it was)", ErrImageRefused, node, we.Message)
		case http.StatusConflict:
			if strings.Contains(we.Message, "lineage") {
				return fmt.Errorf("%w (node %s): %s", ErrImageLineage, node, strings.ReplaceAll(we.Message, "?force=true", "PUT /_shard/tenants/"+name+"/file?force=true"))
			}
		case http.StatusRequestEntityTooLarge:
			return fmt.Errorf("%w (node %s): %s", ErrImageTooLarge, node, we.Message)
		}
	}
	return fmt.Errorf("restore %s on %s: %w (the tenant is as it was)", name, node, nodeapi.CallError(err))
}

// countingBody counts what the client's body gave and keeps the error it
// ended with, to tell a client that stopped from a node that refused.
type countingBody struct {
	r   io.Reader
	n   int64
	err error
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil {
		b.err = err
	}
	return n, err
}

// releaseHold ends the restore's hold, reading the record again if another
// change landed meanwhile; a hold a failover ended (package region/failover) is
// no longer the restore's to release.
func (c *shardCall) releaseHold(s *global.Store, name string, at global.Versioned[global.Tenant]) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.r.Context()), c.rt.cfg.NodeTimeout)
	defer cancel()
	for range 3 {
		if at.Value.HeldBy != holdRestore {
			c.rt.log.Info("restore's hold ended by a failover", "tenant", name, "held_by", at.Value.HeldBy)
			return
		}
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
