package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

// copyOpts are the flags backup and restore share: --tenants DIR and
// --token for a whole node, --file for one tenant through the router.
type copyOpts struct {
	dir   string
	token string
	file  string
}

func addCopyFlags(fs *flag.FlagSet, e *env) *copyOpts {
	o := &copyOpts{}
	fs.StringVar(&o.dir, "tenants", "", "(a whole node, NODE_URL) `DIR` of tenant images, <tenant>.fenec each")
	fs.StringVar(&o.token, "token", e.getenv("FENEC_ADMIN_TOKEN"), "(a whole node) the node's admin `TOKEN` (default $FENEC_ADMIN_TOKEN)")
	fs.StringVar(&o.file, "file", "", "(one tenant, through the router) the image's `PATH` (default TENANT.fenec)")
	return o
}

// setupBackup is `fenec backup TENANT [--file PATH]` through the router, or
// `fenec backup NODE_URL --tenants DIR --token T` from one node.
func setupBackup(fs *flag.FlagSet, e *env) runFunc {
	o := addCopyFlags(fs, e)
	viaRouter := routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 1, "one TENANT (or NODE_URL with --tenants DIR)"); err != nil {
			return err
		}
		return backupTenant(ctx, c, e, pos[0], fileOr(o.file, pos[0]))
	})
	return func(ctx context.Context, pos []string) error {
		if o.dir != "" {
			hc, err := e.httpClient()
			if err != nil {
				return err
			}
			return backupNode(ctx, hc, pos, o.dir, o.token, e.stdout)
		}
		return viaRouter(ctx, pos)
	}
}

// setupRestore is `fenec restore TENANT [--file PATH]` through the router,
// or `fenec restore NODE_URL --tenants DIR --token T` onto one node.
func setupRestore(fs *flag.FlagSet, e *env) runFunc {
	o := addCopyFlags(fs, e)
	force := fs.Bool("force", false, "take an image of another lineage than the tenant's (another tenant's file, or one recreated since)")
	viaRouter := routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 1, "one TENANT (or NODE_URL with --tenants DIR)"); err != nil {
			return err
		}
		return restoreTenant(ctx, c, e, pos[0], fileOr(o.file, pos[0]), *force)
	})
	return func(ctx context.Context, pos []string) error {
		if o.dir != "" {
			hc, err := e.httpClient()
			if err != nil {
				return err
			}
			return restoreNode(ctx, hc, pos, o.dir, o.token, *force, e.stdout, e.stderr)
		}
		return viaRouter(ctx, pos)
	}
}

// openImage opens the image at path and reads its first bytes: a file
// that is not a fenec tenant image is refused here, nothing sent. The
// reader gives the whole image; the caller closes the file.
func openImage(path string) (*os.File, io.Reader, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("image: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("image: %w", err)
	}
	r, _, err := engine.ReadImageHead(f)
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("image %s (nothing sent): %w", path, err)
	}
	return f, r, fi.Size(), nil
}

func fileOr(file, tenant string) string {
	if file != "" {
		return file
	}
	return tenant + fileExt
}

// backupTenant reads the tenant's image through the router (GET
// /_shard/tenants/<t>/file) into path: written to a temporary name beside
// it, synced, then renamed, so path never holds half an image.
func backupTenant(ctx context.Context, c *routerClient, e *env, tenant, path string) error {
	if !wire.ValidName(tenant) {
		return fmt.Errorf("%w: tenant %q must be [a-z0-9_-]{1,64}", errUsage, tenant)
	}
	req, err := c.request(ctx, http.MethodGet, tenantPath(tenant, "/file"), nil)
	if err != nil {
		return err
	}
	res, err := c.send(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	tmp := f.Name()
	p := newProgress(e, "backup "+tenant, res.ContentLength)
	n, err := io.Copy(io.MultiWriter(f, p), res.Body)
	p.end()
	if err == nil && res.ContentLength >= 0 && n != res.ContentLength {
		err = fmt.Errorf("image cut short: %d of %d bytes", n, res.ContentLength)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup of %s (nothing written to %s): %w", tenant, path, err)
	}
	b, _ := json.Marshal(map[string]any{"tenant": tenant, "node": res.Header.Get("Fenec-Placed-On"), "bytes": n, "file": path})
	return c.done(b, fmt.Sprintf("tenant %s: %d bytes from node %s into %s", tenant, n, res.Header.Get("Fenec-Placed-On"), path))
}

// restoreTenant sends the image at path to the router (PUT
// /_shard/tenants/<t>/file), which installs it in the tenant's place on
// its node.
func restoreTenant(ctx context.Context, c *routerClient, e *env, tenant, path string, force bool) error {
	if !wire.ValidName(tenant) {
		return fmt.Errorf("%w: tenant %q must be [a-z0-9_-]{1,64}", errUsage, tenant)
	}
	f, img, size, err := openImage(path)
	if err != nil {
		return err
	}
	defer f.Close()
	target := tenantPath(tenant, "/file")
	if force {
		target += "?force=true"
	}
	p := newProgress(e, "restore "+tenant, size)
	req, err := c.request(ctx, http.MethodPut, target, io.TeeReader(img, p))
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	res, err := c.send(req, http.StatusOK)
	p.end()
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the router's answer: %w", err)
	}
	var ans struct {
		Node  string `json:"node"`
		Bytes int64  `json:"bytes"`
		MS    int64  `json:"ms"`
	}
	_ = json.Unmarshal(b, &ans)
	return c.done(b, fmt.Sprintf("tenant %s restored on node %s from %s: %d bytes in %d ms", tenant, ans.Node, path, ans.Bytes, ans.MS))
}

// progress draws bytes copied on a terminal's line, at most every
// progressEvery; off a terminal it draws nothing.
type progress struct {
	w     io.Writer
	what  string
	total int64 // -1: unknown
	on    bool

	mu    sync.Mutex
	n     int64
	drawn time.Time
}

const progressEvery = 200 * time.Millisecond

func newProgress(e *env, what string, total int64) *progress {
	return &progress{w: e.stderr, what: what, total: total, on: e.terminal}
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(len(b))
	if p.on && time.Since(p.drawn) >= progressEvery {
		p.drawLocked()
	}
	return len(b), nil
}

// end draws the last count and ends the line.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		p.drawLocked()
		fmt.Fprintln(p.w)
	}
}

func (p *progress) drawLocked() {
	p.drawn = time.Now()
	if p.total >= 0 {
		pct := 100.0
		if p.total > 0 {
			pct = float64(p.n) * 100 / float64(p.total)
		}
		fmt.Fprintf(p.w, "\r%s: %s of %s (%.0f%%)   ", p.what, sizeText(p.n), sizeText(p.total), pct)
		return
	}
	fmt.Fprintf(p.w, "\r%s: %s   ", p.what, sizeText(p.n))
}

// sizeText shows a byte count in B, KiB, MiB or GiB.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
