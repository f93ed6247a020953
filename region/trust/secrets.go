package trust

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// The directory's two secrets, which every router of a deployment holds
// alike: the key node tokens are sealed under (global.Sealing) and the
// password its etcd takes clients with (global.EnableAuth). A router
// reads them from --directory-key-file and --directory-password-file;
// one that embeds a member and is given none keeps them in its
// --etcd-dir (KeyFileName, PasswordFileName), made there the first time
// it founds a directory alone. A new directory is closed as it is first
// used; one made before (its etcd open to any client) only when a router
// is started with --close-directory, and every start until then warns.
//
// Routers that must hold the files they are given, and make none: a
// region's routers (they open the global directory's sealed records and
// reach its etcd with its password), and the members founding a
// directory together (each would make its own): they refuse to start
// without them. A router that finds sealed records it cannot open, or
// cannot reach a directory without a password it lacks, refuses to start
// and says which file to copy from where.

// globalProbe bounds the look at the global directory at a region's
// router's start: the global tier may be away, and the region's router
// starts without it.
const globalProbe = 5 * time.Second

// secretsWait bounds the look at the directory's sealed records as the
// router starts.
const secretsWait = 2 * time.Second

// loadSecrets reads the key and the password files where they are.
func (t *Trust) loadSecrets() error {
	if p := t.cfg.keyPath(); p != "" {
		k, err := global.LoadKeyring(p)
		switch {
		case err == nil:
			t.keys = k
		case t.cfg.KeyFile != "" || !errors.Is(err, fs.ErrNotExist):
			return err
		}
	}
	if p := t.cfg.passwordPath(); p != "" {
		pw, err := global.LoadPassword(p)
		switch {
		case err == nil:
			t.password = pw
		case t.cfg.PasswordFile != "" || !errors.Is(err, fs.ErrNotExist):
			return err
		}
	}
	return nil
}

// refuseFoundingBlind refuses, before its member starts, a router that
// would found a directory of several members with neither a key nor a
// password file: the founders could not agree on secrets each made
// alone, and waiting for the others' members to find that out only
// delays the same refusal. A member restarted on its data (an old open
// directory) is let through to be warned about instead.
func (t *Trust) refuseFoundingBlind() error {
	c := t.cfg
	if !c.embedded() || c.mirroring() || c.mayMake() || (t.keys != nil && t.password != "") {
		return nil
	}
	if c.Etcd.ClusterState == global.ClusterExisting {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.Etcd.Dir, "member")); err == nil {
		return nil
	}
	return t.makeSecrets()
}

// makeSecrets makes, in the --etcd-dir, the key and password the router
// lacks where it may (mayMake), or refuses a new directory of several
// members without them.
func (t *Trust) makeSecrets() error {
	if t.keys != nil && t.password != "" {
		return nil
	}
	if !t.cfg.mayMake() {
		if t.cfg.embedded() && !t.cfg.mirroring() {
			return fmt.Errorf("%w: this directory is founded by several members, and each router would make a key and password of its own: make them once (fenec certs writes %s and %s) and give every router the same --directory-key-file and --directory-password-file",
				ErrSecrets, KeyFileName, PasswordFileName)
		}
		return nil
	}
	var made []string
	if t.keys == nil {
		p := t.cfg.keyPath()
		if err := tlsx.WriteFile(p, []byte(global.NewKeyText()+"\n"), 0o600); err != nil {
			return fmt.Errorf("make the directory key: %w", err)
		}
		k, err := global.LoadKeyring(p)
		if err != nil {
			return err
		}
		t.keys, made = k, append(made, p)
	}
	if t.password == "" {
		p := t.cfg.passwordPath()
		pw := global.NewPasswordText()
		if err := tlsx.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
			return fmt.Errorf("make the directory password: %w", err)
		}
		t.password, made = pw, append(made, p)
	}
	t.log.Warn("made the directory's secrets: every other router of this directory, standbys and regions' routers included, needs the same files (--directory-key-file, --directory-password-file)",
		"files", strings.Join(made, ","))
	return nil
}

// CloseDirectory turns on the authentication of d, the directory's etcd
// at urls, if it is off and the directory is new and embedded here (or
// --close-directory says so), making the secrets it lacks first; it
// returns the directory opened again with the password. A directory left
// open is warned about at every start. On an error d is closed.
func (t *Trust) CloseDirectory(ctx context.Context, d *global.EtcdDirectory, urls []string) (*global.EtcdDirectory, error) {
	out, err := t.closeDirectory(ctx, d, urls)
	if err != nil && out != nil {
		err = errors.Join(err, out.Close())
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// closeDirectory is CloseDirectory leaving the directory it returns open
// on an error (nil once d was closed).
func (t *Trust) closeDirectory(ctx context.Context, d *global.EtcdDirectory, urls []string) (*global.EtcdDirectory, error) {
	on, err := d.AuthEnabled(ctx)
	if err != nil || on {
		return d, err
	}
	fresh := false
	if t.cfg.embedded() {
		if fresh, err = d.Empty(ctx); err != nil {
			return d, err
		}
	}
	if !fresh && !t.cfg.CloseDirectory {
		t.log.Warn("the directory's etcd takes any client that reaches it, node tokens readable and placements writable by it (a directory made before directories were closed, or an etcd cluster of the operator's with its authentication off): give every router of the deployment the same key and password files, then start the leading router once with --close-directory (docs/security.md)",
			"etcd", strings.Join(urls, ","))
		return d, nil
	}
	if err := t.makeSecrets(); err != nil {
		return d, err
	}
	if t.password == "" {
		t.log.Warn("the directory's etcd takes any client that reaches it: give this router the deployment's --directory-password-file (and --directory-key-file) to close it", "etcd", strings.Join(urls, ","))
		return d, nil
	}
	if err := d.EnableAuth(ctx, t.password); err != nil {
		return d, err
	}
	_ = d.Close()
	if d, err = global.OpenEtcd(ctx, urls, t.cfg.Prefix, t.EtcdOptions(urls)...); err != nil {
		return nil, fmt.Errorf("open the closed directory: %w", err)
	}
	if err := d.CheckAuth(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	t.log.Info("the directory takes only routers with its password from now on", "etcd", strings.Join(urls, ","), "password_file", t.cfg.passwordPath())
	return d, nil
}

// CheckDirectory refuses to start a router that cannot use what d, its
// directory, holds: node tokens sealed under a key it does not hold (the
// global directory's, on a region's router, are checked by ProbeGlobal).
//
// A directory that does not answer within secretsWait (a standby started
// before it) is checked once it does, on a goroutine of the router's
// (Deps.Go): what the router then finds is logged as an error naming the
// file, and every request to a node whose token does not open is answered
// 502 saying so.
func (t *Trust) CheckDirectory(ctx context.Context, d global.Directory) error {
	if t.keys == nil && !t.cfg.DirectoryGiven {
		t.log.Warn("node tokens are held in clear in the directory: give every router of the deployment the same --directory-key-file (docs/security.md)")
	}
	wctx, cancel := context.WithTimeout(ctx, secretsWait)
	defer cancel()
	err := t.checkSeals(wctx, d, "the directory")
	if err == nil || ctx.Err() != nil || wctx.Err() == nil {
		return err
	}
	t.deps.Go(func(ctx context.Context) {
		if err := t.checkSeals(ctx, d, "the directory"); err != nil && ctx.Err() == nil {
			t.log.Error("this router cannot use the directory's node records", "err", err)
		}
	})
	return nil
}

// checkSeals refuses d's node records sealed under a key this router
// does not hold, and d's note of a key it does not hold, saying which
// file to copy from where.
func (t *Trust) checkSeals(ctx context.Context, d global.Directory, what string) error {
	foreign, err := global.ForeignSeals(ctx, d, t.keys)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	note, _ := readSeal(ctx, d)
	if note.Key != "" && (t.keys == nil || !t.keys.Holds(note.Key)) {
		foreign[note.Key] = append(foreign[note.Key], "(the directory's note)")
	}
	for id, nodes := range foreign {
		slices.Sort(nodes)
		from := "the key file every router of the deployment reads (a router that made one keeps it as " + KeyFileName + " in its --etcd-dir)"
		if note.Key == id && note.File != "" {
			from = fmt.Sprintf("%s from router %s", note.File, note.Router)
		}
		return fmt.Errorf("%w: %s holds node tokens sealed under key %s (nodes %s), which this router does not hold, and it would send them no request: copy %s to this machine and start with --directory-key-file naming it",
			ErrSecrets, what, id, strings.Join(nodes, ", "), from)
	}
	return nil
}

// ProbeGlobal checks, on a region's router, that the global directory
// takes this router's password and holds no token sealed under a key it
// lacks. A global directory out of reach is warned about only: the region
// starts without it.
func (t *Trust) ProbeGlobal(ctx context.Context) error {
	var gd global.Directory
	switch {
	case t.cfg.Global != nil:
		gd = t.Seal(t.cfg.Global) // never closed here: the router does not own it
	case len(t.cfg.GlobalURLs) > 0:
		pctx, cancel := context.WithTimeout(ctx, globalProbe)
		defer cancel()
		d, err := global.OpenEtcd(pctx, t.cfg.GlobalURLs, t.cfg.Prefix, t.EtcdOptions(t.cfg.GlobalURLs)...)
		if errors.Is(err, global.ErrAuth) {
			return fmt.Errorf("%w: the global directory at %s: %w (the global tier's routers keep theirs as %s in their --etcd-dir where they made it)",
				ErrSecrets, strings.Join(t.cfg.GlobalURLs, ","), err, PasswordFileName)
		}
		if err != nil {
			t.log.Warn("the global directory cannot be reached as this router starts: its key and password are checked once the link reaches it", "global", strings.Join(t.cfg.GlobalURLs, ","), "err", err)
			return nil
		}
		defer d.Close()
		gd = t.Seal(d)
	default:
		return nil
	}
	return t.checkSeals(ctx, gd, "the global directory")
}

// readSeal reads d's note of its sealing key (zero when there is none).
func readSeal(ctx context.Context, d global.Directory) (global.SealInfo, int64) {
	kv, err := d.Get(ctx, global.KeySeal)
	if err != nil {
		return global.SealInfo{}, 0
	}
	var s global.SealInfo
	if json.Unmarshal(kv.Value, &s) != nil {
		return global.SealInfo{}, kv.ModRev
	}
	return s, kv.ModRev
}

// noteSeal records the leading router's sealing key in d, where the note
// names none or one the router holds behind it (a rotation); routers
// without the key say from it which file they need.
func (t *Trust) noteSeal(ctx context.Context, d global.Directory) {
	note, rev := readSeal(ctx, d)
	if note.Key == t.keys.ID() {
		return
	}
	file, _ := filepath.Abs(t.cfg.keyPath())
	if t.cfg.DirectoryGiven && t.cfg.KeyFile == "" {
		file = ""
	}
	b, _ := json.Marshal(global.SealInfo{Key: t.keys.ID(), Router: t.id, File: file})
	if _, err := d.Txn(ctx, []global.Cond{global.IfModRev(global.KeySeal, rev)}, []global.Op{global.OpPut(global.KeySeal, b)}); err != nil && !errors.Is(err, global.ErrConflict) {
		t.log.Warn("note the sealing key in the directory", "err", err)
	}
}

// SealClearNodes seals, as this router takes the lead with a key, every
// node record d, its directory, holds in clear (written before tokens
// were sealed, or by a router without the key), and seals again under the
// key file's first key every record sealed under a later one (a key
// rotation): the record is written again, through the lead's store, as it
// is. Until then no router with the key uses a record in clear. It
// returns once the router's own view holds what it sealed: a router
// serving from a view still holding the records in clear would refuse to
// forward to their nodes. It notes the key in d first.
func (t *Trust) SealClearNodes(ctx context.Context, d global.Directory) {
	if t.keys == nil {
		return
	}
	s, err := t.deps.Changes(ctx)
	if err != nil {
		return
	}
	t.noteSeal(ctx, d)
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		t.log.Error("seal node tokens", "err", err)
		return
	}
	var sealed int64
	for name, n := range nodes {
		if !n.Value.Clear && !n.Value.Rekey {
			continue
		}
		rev, err := s.Txn().PutNode(name, n.Rev, n.Value).Commit(ctx)
		if err != nil {
			t.log.Error("seal node token", "node", name, "err", err)
			continue
		}
		sealed = max(sealed, rev)
		t.log.Info("sealed a node token under the first key", "node", name, "was_clear", n.Value.Clear)
	}
	if sealed > 0 {
		t.deps.Settle(ctx, sealed)
	}
}
