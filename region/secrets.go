package region

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

// Names of the files a router keeps in its --etcd-dir when it made them.
const (
	KeyFileName      = "directory.key"
	PasswordFileName = "directory.password"
)

// globalProbe bounds the look at the global directory at a region's
// router's start: the global tier may be away, and the region's router
// starts without it.
const globalProbe = 5 * time.Second

// keyPath is the key file the router reads: the one given, else the one
// in its --etcd-dir (which may not exist yet).
func (c Config) keyPath() string {
	if c.DirectoryKeyFile != "" || !c.embedded() {
		return c.DirectoryKeyFile
	}
	return filepath.Join(c.Etcd.Dir, KeyFileName)
}

// passwordPath is keyPath for the password file.
func (c Config) passwordPath() string {
	if c.DirectoryPasswordFile != "" || !c.embedded() {
		return c.DirectoryPasswordFile
	}
	return filepath.Join(c.Etcd.Dir, PasswordFileName)
}

// mayMake says whether the router makes the secrets it lacks in its
// --etcd-dir: it embeds a member, mirrors no global directory, and
// founds its directory alone or was told to close an old one.
func (c Config) mayMake() bool {
	if !c.embedded() || len(c.GlobalURLs) > 0 || c.Global != nil {
		return false
	}
	alone := c.Etcd.ClusterState != global.ClusterExisting && !strings.Contains(c.Etcd.InitialCluster, ",")
	return alone || c.CloseDirectory
}

// loadSecrets reads the key and the password files where they are.
func (rt *Router) loadSecrets() error {
	if p := rt.cfg.keyPath(); p != "" {
		k, err := global.LoadKeyring(p)
		switch {
		case err == nil:
			rt.keys = k
		case rt.cfg.DirectoryKeyFile != "" || !errors.Is(err, fs.ErrNotExist):
			return err
		}
	}
	if p := rt.cfg.passwordPath(); p != "" {
		pw, err := global.LoadPassword(p)
		switch {
		case err == nil:
			rt.password = pw
		case rt.cfg.DirectoryPasswordFile != "" || !errors.Is(err, fs.ErrNotExist):
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
func (rt *Router) refuseFoundingBlind() error {
	c := rt.cfg
	if !c.embedded() || rt.mirroring() || c.mayMake() || (rt.keys != nil && rt.password != "") {
		return nil
	}
	if c.Etcd.ClusterState == global.ClusterExisting {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.Etcd.Dir, "member")); err == nil {
		return nil
	}
	return rt.makeSecrets()
}

// makeSecrets makes, in the --etcd-dir, the key and password the router
// lacks where it may (mayMake), or refuses a new directory of several
// members without them.
func (rt *Router) makeSecrets() error {
	if rt.keys != nil && rt.password != "" {
		return nil
	}
	if !rt.cfg.mayMake() {
		if rt.cfg.embedded() && !rt.mirroring() {
			return fmt.Errorf("%w: this directory is founded by several members, and each router would make a key and password of its own: make them once (fenec certs writes %s and %s) and give every router the same --directory-key-file and --directory-password-file",
				ErrSecrets, KeyFileName, PasswordFileName)
		}
		return nil
	}
	var made []string
	if rt.keys == nil {
		p := rt.cfg.keyPath()
		if err := tlsx.WriteFile(p, []byte(global.NewKeyText()+"\n"), 0o600); err != nil {
			return fmt.Errorf("make the directory key: %w", err)
		}
		k, err := global.LoadKeyring(p)
		if err != nil {
			return err
		}
		rt.keys, made = k, append(made, p)
	}
	if rt.password == "" {
		p := rt.cfg.passwordPath()
		pw := global.NewPasswordText()
		if err := tlsx.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
			return fmt.Errorf("make the directory password: %w", err)
		}
		rt.password, made = pw, append(made, p)
	}
	rt.log.Warn("made the directory's secrets: every other router of this directory, standbys and regions' routers included, needs the same files (--directory-key-file, --directory-password-file)",
		"files", strings.Join(made, ","))
	return nil
}

// closeDirectory turns on the authentication of d, the directory's etcd
// at urls, if it is off and the directory is new and embedded here (or
// --close-directory says so), making the secrets it lacks first; it
// returns the directory opened again with the password. A directory left
// open is warned about at every start.
func (rt *Router) closeDirectory(ctx context.Context, d *global.EtcdDirectory, urls []string) (*global.EtcdDirectory, error) {
	on, err := d.AuthEnabled(ctx)
	if err != nil || on {
		return d, err
	}
	fresh := false
	if rt.cfg.embedded() {
		if fresh, err = d.Empty(ctx); err != nil {
			return d, err
		}
	}
	if !fresh && !rt.cfg.CloseDirectory {
		rt.log.Warn("the directory's etcd takes any client that reaches it, node tokens readable and placements writable by it (a directory made before directories were closed, or an etcd cluster of the operator's with its authentication off): give every router of the deployment the same key and password files, then start the leading router once with --close-directory (docs/security.md)",
			"etcd", strings.Join(urls, ","))
		return d, nil
	}
	if err := rt.makeSecrets(); err != nil {
		return d, err
	}
	if rt.password == "" {
		rt.log.Warn("the directory's etcd takes any client that reaches it: give this router the deployment's --directory-password-file (and --directory-key-file) to close it", "etcd", strings.Join(urls, ","))
		return d, nil
	}
	if err := d.EnableAuth(ctx, rt.password); err != nil {
		return d, err
	}
	_ = d.Close()
	if d, err = global.OpenEtcd(ctx, urls, rt.cfg.Prefix, rt.etcdOptions(urls)...); err != nil {
		return nil, fmt.Errorf("open the closed directory: %w", err)
	}
	if err := d.CheckAuth(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	rt.log.Info("the directory takes only routers with its password from now on", "etcd", strings.Join(urls, ","), "password_file", rt.cfg.passwordPath())
	return d, nil
}

// checkSecrets refuses to start a router that cannot use what its
// directory holds: node tokens sealed under a key it does not hold (the
// global directory's, on a region's router, are checked by probeGlobal).
//
// A directory that does not answer within secretsWait (a standby started
// before it) is checked once it does, in the background: what the router
// then finds is logged as an error naming the file, and every request to
// a node whose token does not open is answered 502 saying so.
func (rt *Router) checkSecrets(ctx context.Context) error {
	if rt.keys == nil && rt.cfg.Directory == nil {
		rt.log.Warn("node tokens are held in clear in the directory: give every router of the deployment the same --directory-key-file (docs/security.md)")
	}
	wctx, cancel := context.WithTimeout(ctx, secretsWait)
	defer cancel()
	err := rt.checkSeals(wctx, rt.dir, "the directory")
	if err == nil || ctx.Err() != nil || wctx.Err() == nil {
		return err
	}
	rt.wg.Go(func() {
		if err := rt.checkSeals(rt.ctx, rt.dir, "the directory"); err != nil && rt.ctx.Err() == nil {
			rt.log.Error("this router cannot use the directory's node records", "err", err)
		}
	})
	return nil
}

// secretsWait bounds the look at the directory's sealed records as the
// router starts.
const secretsWait = 2 * time.Second

// checkSeals refuses d's node records sealed under a key this router
// does not hold, and d's note of a key it does not hold, saying which
// file to copy from where.
func (rt *Router) checkSeals(ctx context.Context, d global.Directory, what string) error {
	foreign, err := global.ForeignSeals(ctx, d, rt.keys)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	note, _ := readSeal(ctx, d)
	if note.Key != "" && (rt.keys == nil || !rt.keys.Holds(note.Key)) {
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

// probeGlobal checks, on a region's router, that the global directory
// takes this router's password and holds no token sealed under a key it
// lacks. A global directory out of reach is warned about only: the region
// starts without it.
func (rt *Router) probeGlobal(ctx context.Context) error {
	var gd global.Directory
	switch {
	case rt.cfg.Global != nil:
		gd = global.Sealing(unclosed{rt.cfg.Global}, rt.keys)
	case len(rt.cfg.GlobalURLs) > 0:
		pctx, cancel := context.WithTimeout(ctx, globalProbe)
		defer cancel()
		d, err := global.OpenEtcd(pctx, rt.cfg.GlobalURLs, rt.cfg.Prefix, rt.etcdOptions(rt.cfg.GlobalURLs)...)
		if errors.Is(err, global.ErrAuth) {
			return fmt.Errorf("%w: the global directory at %s: %w (the global tier's routers keep theirs as %s in their --etcd-dir where they made it)",
				ErrSecrets, strings.Join(rt.cfg.GlobalURLs, ","), err, PasswordFileName)
		}
		if err != nil {
			rt.log.Warn("the global directory cannot be reached as this router starts: its key and password are checked once the link reaches it", "global", strings.Join(rt.cfg.GlobalURLs, ","), "err", err)
			return nil
		}
		defer d.Close()
		gd = global.Sealing(d, rt.keys)
	default:
		return nil
	}
	return rt.checkSeals(ctx, gd, "the global directory")
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

// noteSeal records the leading router's sealing key in the directory,
// where the note names none or one the router holds behind it (a
// rotation); routers without the key say from it which file they need.
func (rt *Router) noteSeal(ctx context.Context) {
	if rt.keys == nil {
		return
	}
	note, rev := readSeal(ctx, rt.dir)
	if note.Key == rt.keys.ID() {
		return
	}
	file, _ := filepath.Abs(rt.cfg.keyPath())
	if rt.cfg.Directory != nil && rt.cfg.DirectoryKeyFile == "" {
		file = ""
	}
	b, _ := json.Marshal(global.SealInfo{Key: rt.keys.ID(), Router: rt.id, File: file})
	if _, err := rt.dir.Txn(ctx, []global.Cond{global.IfModRev(global.KeySeal, rev)}, []global.Op{global.OpPut(global.KeySeal, b)}); err != nil && !errors.Is(err, global.ErrConflict) {
		rt.log.Warn("note the sealing key in the directory", "err", err)
	}
}

// sealClearNodes seals, as this router takes the lead with a key, every
// node record the directory holds in clear (written before tokens were
// sealed, or by a router without the key), and seals again under the
// key file's first key every record sealed under a later one (a key
// rotation): the record is written again as it is. Until then no router
// with the key uses a record in clear. It returns once the router's own
// view holds what it sealed: a router serving from a view still holding
// the records in clear would refuse to forward to their nodes. It notes
// the key in the directory first (noteSeal).
func (rt *Router) sealClearNodes(ctx context.Context) {
	if rt.keys == nil {
		return
	}
	s, err := rt.lead.Changes(ctx)
	if err != nil {
		return
	}
	rt.noteSeal(ctx)
	nodes, _, err := s.ListNodes(ctx)
	if err != nil {
		rt.log.Error("seal node tokens", "err", err)
		return
	}
	var sealed int64
	for name, n := range nodes {
		if !n.Value.Clear && !n.Value.Rekey {
			continue
		}
		rev, err := s.Txn().PutNode(name, n.Rev, n.Value).Commit(ctx)
		if err != nil {
			rt.log.Error("seal node token", "node", name, "err", err)
			continue
		}
		sealed = max(sealed, rev)
		rt.log.Info("sealed a node token under the first key", "node", name, "was_clear", n.Value.Clear)
	}
	if sealed > 0 {
		rt.settleTo(ctx, sealed)
	}
}

// closeNil closes d unless it is nil.
func closeNil(d *global.EtcdDirectory) error {
	if d == nil {
		return nil
	}
	return d.Close()
}
