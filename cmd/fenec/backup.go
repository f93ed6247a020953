package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fenec-go/fenec/wire"
)

// callTimeout bounds one admin call that moves no image.
const callTimeout = 30 * time.Second

// fileExt is a tenant file's extension, on a node and in a backup.
const fileExt = ".fenec"

// admin is a client of one node's /_admin/.
type admin struct {
	api *wire.AdminClient
	hc  *http.Client
}

// nodeAdmin checks a node mode command line (NODE_URL --tenants DIR
// --token T) and returns the node's admin client.
func nodeAdmin(hc *http.Client, pos []string, dir, token string) (*admin, error) {
	switch {
	case len(pos) != 1:
		return nil, fmt.Errorf("%w: want one NODE_URL, got %d arguments", errUsage, len(pos))
	case dir == "":
		return nil, fmt.Errorf("%w: --tenants DIR is required", errUsage)
	case token == "":
		return nil, fmt.Errorf("%w: --token is required", errUsage)
	}
	return &admin{api: &wire.AdminClient{Base: nodeURL(pos[0]), Token: token, HTTP: hc}, hc: hc}, nil
}

// tenants lists the tenants on the node.
func (a *admin) tenants(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	names, err := a.api.Tenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("tenant list: %w", err)
	}
	for _, n := range names {
		if !wire.ValidName(n) {
			return nil, fmt.Errorf("tenant list: bad name %q", n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// backupNode writes every tenant's image on the node into the directory.
func backupNode(ctx context.Context, hc *http.Client, pos []string, dir, token string, stdout io.Writer) error {
	a, err := nodeAdmin(hc, pos, dir, token)
	if err != nil {
		return err
	}
	defer a.hc.CloseIdleConnections()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	names, err := a.tenants(ctx)
	if err != nil {
		return err
	}
	var total int64
	for _, t := range names {
		n, err := a.backupOne(ctx, dir, t)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", t, err)
		}
		total += n
		fmt.Fprintf(stdout, "%s\t%d bytes\n", t, n)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s, %d bytes, into %s\n", counted(len(names), "tenant"), total, dir)
	return nil
}

// backupOne copies one image into dir/<t>.fenec: written to a temp name,
// synced, then renamed, so the directory never holds half an image under
// a tenant's name.
func (a *admin) backupOne(ctx context.Context, dir, t string) (int64, error) {
	image, size, err := a.api.Image(ctx, t)
	if err != nil {
		return 0, err
	}
	defer image.Close()
	f, err := os.CreateTemp(dir, "."+t+fileExt+".tmp-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	n, err := io.Copy(f, image)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("image cut short: %d of %d bytes", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, t+fileExt))
	}
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("write image: %w", err)
	}
	return n, nil
}

// restoreNode restores every image in the directory on the node, each in
// its tenant's place: the node verifies an image whole beside the live
// tenant before it replaces it, so a damaged image is refused and leaves
// its tenant as it was. The others are restored all the same; the run
// fails if any was refused.
func restoreNode(ctx context.Context, hc *http.Client, pos []string, dir, token string, force bool, stdout, stderr io.Writer) error {
	a, err := nodeAdmin(hc, pos, dir, token)
	if err != nil {
		return err
	}
	defer a.hc.CloseIdleConnections()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	count := 0
	var refused []string
	for _, e := range entries {
		t, ok := strings.CutSuffix(e.Name(), fileExt)
		if !ok || !e.Type().IsRegular() || !wire.ValidName(t) {
			continue
		}
		n, err := a.restoreOne(ctx, filepath.Join(dir, e.Name()), t, force)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(stderr, "fenec restore: tenant %s refused, left as it was: %v\n", t, err)
			refused = append(refused, t)
			continue
		}
		count++
		fmt.Fprintf(stdout, "%s\t%d bytes\n", t, n)
	}
	fmt.Fprintf(stdout, "restored %s from %s\n", counted(count, "tenant"), dir)
	if len(refused) > 0 {
		return fmt.Errorf("%d refused, each left as it was on the node: %s", len(refused), strings.Join(refused, ", "))
	}
	return nil
}

// restoreOne sends the image at path to the node to take in tenant t's
// place (PUT .../file?replace=true), which it does only once it verified
// the image whole; a file that is not an image is refused unsent.
func (a *admin) restoreOne(ctx context.Context, path, t string, force bool) (int64, error) {
	f, img, size, err := openImage(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := a.api.Restore(ctx, t, img, size, wire.RestoreOptions{Force: force}); err != nil {
		return 0, err
	}
	return size, nil
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
