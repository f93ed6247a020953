package node

// A replica's file and what is kept beside it: whom it follows, as whom,
// and whether it heard from that node since it was told to follow it;
// the admin routes that set and read it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/jsonerr"
	"github.com/fenec-go/fenec/wire"
)

// followExt ends the file beside a replica's that says whom it follows.
const followExt = ".follow"

// followState is a replica file's role, kept beside it: the node it
// follows and whether it has heard a hello from that node since it was
// told to follow it (what lets it be promoted whatever history it holds).
type followState struct {
	From string `json:"from"`
	// As is the name this copy follows under (its node's name in the
	// directory), sent with every feed request: a primary counts only the
	// copy its lease list names as holding a write. Empty: unnamed.
	As      string    `json:"as,omitempty"`
	Heard   bool      `json:"heard"`
	HeardAt time.Time `json:"heard_at,omitzero"`
	// Role is wire.RoleRead for a read copy (never promoted, sent only
	// what its primary committed); "" a voting copy's.
	Role string `json:"role,omitempty"`
}

func (r *registry) followPath(name string) string {
	return filepath.Join(r.dir, name+followExt)
}

// loadFollow reads a tenant's follow state; nil for a primary's file.
func (r *registry) loadFollow(name string) (*followState, error) {
	b, err := os.ReadFile(r.followPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("read the follow state of %s: %s: %w (the node's log names the file)", name, pe.Op, pe.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("read the follow state of %s: %w", name, err)
	}
	var st followState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read follow state of %s: %w", name, err)
	}
	return &st, nil
}

// storeFollow keeps st beside the tenant's file, written whole and
// renamed into place.
func (r *registry) storeFollow(name string, st followState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeFileAtomic(r.dir, r.followPath(name), b)
}

// dropFollow makes a file a primary's again on disk.
func (r *registry) dropFollow(name string) error {
	if err := r.unfollow(name); err != nil {
		return err
	}
	return syncDir(r.dir)
}

// unfollow removes a file's follow state, not yet durably: a syncDir of
// the registry's directory makes it so (dropFollow, or one for many).
func (r *registry) unfollow(name string) error {
	if err := os.Remove(r.followPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove follow state: %w", err)
	}
	return nil
}

// writeFileAtomic writes b to a temp file in dir, syncs it and renames it
// to path, then syncs dir.
func writeFileAtomic(dir, path string, b []byte) error {
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return syncDir(dir)
}

// lineageID names a file's lineage: its first history.
func lineageID(l []engine.LineageEntry) uint64 {
	if len(l) == 0 {
		return 0
	}
	return l[0].History
}

// onLineage says whether history h is on l.
func onLineage(l []engine.LineageEntry, h uint64) bool {
	for _, e := range l {
		if e.History == h {
			return true
		}
	}
	return false
}

// heard records a hello from the followed node (once, durably, since the
// node was told to follow it) and when it came.
func (t *tenant) heard() error {
	now := time.Now().UTC()
	t.mu.Lock()
	t.lastHello = now
	t.mu.Unlock()
	st := t.follow.Load()
	if st == nil || st.Heard {
		return nil
	}
	next := *st
	next.Heard, next.HeardAt = true, now
	if err := t.reg.storeFollow(t.name, next); err != nil {
		return err
	}
	t.follow.Store(&next)
	return nil
}

// follow makes an open tenant's file a replica following from, as as,
// in role ("" or wire.RoleRead).
func (r *registry) follow(t *tenant, from, as, role string) error {
	t.stopFollower()
	st := &followState{From: from, As: as, Role: role}
	if err := r.storeFollow(t.name, *st); err != nil {
		return err
	}
	r.startFollower(t, st)
	return nil
}

// checkFrom checks a node URL to follow.
func checkFrom(from string) error {
	u, err := url.Parse(from)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%w: from must be http://host:port", ErrBadRequest)
	}
	return nil
}

// adminFollow has a tenant's file follow another node's copy.
func (c *call) adminFollow(name string) {
	b, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	var body wire.Follow
	if err := jsonerr.Decode(b, &body, 0); err != nil {
		c.fail(fmt.Errorf("%w: follow: %w", ErrBadRequest, err))
		return
	}
	if err := checkFrom(body.From); err != nil {
		c.fail(err)
		return
	}
	if body.As != "" && !wire.ValidName(body.As) {
		c.fail(fmt.Errorf("%w: follow: as %q is not a node name", ErrBadRequest, body.As))
		return
	}
	read, err := feedRole(body.Role)
	if err != nil {
		c.fail(fmt.Errorf("follow: %w", err))
		return
	}
	role, kept := wire.RoleVoting, ""
	if read {
		role, kept = wire.RoleRead, wire.RoleRead
	}
	if c.s.tokens().repl == "" {
		c.fail(fmt.Errorf("follow: %w", ErrCannotFollow))
		return
	}
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	if err := c.s.reg.follow(t, body.From, body.As, kept); err != nil {
		c.fail(err)
		return
	}
	writeJSON(c.w, http.StatusOK, wire.Followed{Tenant: name, From: body.From, Role: role})
	c.s.auditf(c, "follow", name, body.From+" as a "+role+" copy")
}

// adminReplication reports a tenant's role and position.
func (c *call) adminReplication(name string) {
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	out := wire.Replication{
		Role: "primary", Seq: t.db.Seq(), Durable: t.db.Durable(), History: t.db.History(),
		Lineage: wireLineage(t.db.Lineage()), Copies: t.copies(), Frozen: t.isFrozen(),
	}
	if st := t.follow.Load(); st != nil {
		t.mu.Lock()
		last := t.lastHello
		t.mu.Unlock()
		out.Role, out.From, out.Heard = "replica", st.From, st.Heard
		if !last.IsZero() {
			out.LastHello = &last
		}
		out.CopyRole, out.Freshness = wire.RoleVoting, t.freshnessStatus()
		if st.Role == wire.RoleRead {
			out.CopyRole = wire.RoleRead
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

// wireLineage is a file's lineage as the admin API lists it.
func wireLineage(l []engine.LineageEntry) []wire.LineageEntry {
	out := make([]wire.LineageEntry, len(l))
	for i, e := range l {
		out[i] = wire.LineageEntry{History: e.History, From: e.From}
	}
	return out
}
