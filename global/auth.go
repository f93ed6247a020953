package global

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A directory's etcd takes only clients that prove themselves: etcd's own
// authentication, turned on with one user, root, whose password every
// router of a deployment reads from a file. Without the password a client
// reaches the port and learns nothing — no key, no member, no status —
// and changes nothing.
//
// Why a password rather than client certificates alone: a router's
// embedded member on loopback (fenec dev, a single-machine deployment,
// the tests) serves plain HTTP, where every local user reaches the
// port; a password from a file its owner alone reads closes it with no
// CA to make first. Off loopback the member's ports also take only
// certificates of the directory's own CA (--etcd-ca), and the password
// stands behind them.
//
// Why a certificate maps to no user: etcd takes a client certificate's
// common name as the user when no password token comes with a call, and
// only when it verifies client certificates for authentication
// (--client-cert-auth). The embedded member verifies them at the
// handshake alone (its TLS requires one when it has a CA bundle), so a
// certificate named "root" is no one in the directory.

// RootUser is the directory's one user.
const RootUser = "root"

// NewPasswordText makes a new password as a password file holds it: 32
// random bytes in base64. It is a machine's, not a person's, so etcd
// hashes it at the lowest bcrypt cost (EmbedConfig).
func NewPasswordText() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return base64.StdEncoding.EncodeToString(b[:])
}

// LoadPassword reads a password file: its first line, spaces cut off.
func LoadPassword(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrPasswordFile, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256), 4096)
	if !sc.Scan() {
		return "", fmt.Errorf("%w: %s: no password on its first line", ErrPasswordFile, path)
	}
	pw := strings.TrimSpace(sc.Text())
	if pw == "" {
		return "", fmt.Errorf("%w: %s: no password on its first line", ErrPasswordFile, path)
	}
	return pw, nil
}

// WithPassword has the client authenticate as RootUser with password
// (no option: no credentials). A directory without authentication takes
// such a client as any other.
func WithPassword(password string) EtcdOption {
	return func(c *clientv3.Config) {
		if password != "" {
			c.Username, c.Password = RootUser, password
		}
	}
}

// authError says what to do when the directory refused a client's
// credentials, or asked for some it did not bring; other errors pass as
// they are.
func authError(err error) error {
	if err == nil {
		return nil
	}
	e := rpctypes.Error(err)
	is := func(target error) bool { return errors.Is(err, target) || errors.Is(e, target) }
	switch {
	case is(rpctypes.ErrAuthFailed):
		return fmt.Errorf("%w: the password is not the directory's: give this router the password file every router of the deployment reads (--directory-password-file): %w", ErrAuth, err)
	case is(rpctypes.ErrUserEmpty), is(rpctypes.ErrPermissionDenied), is(rpctypes.ErrInvalidAuthToken):
		return fmt.Errorf("%w: the directory takes only routers that show its password: give this router the password file every router of the deployment reads (--directory-password-file; a router that made one keeps it as directory.password in its --etcd-dir): %w", ErrAuth, err)
	}
	return err
}

// AuthEnabled reports whether the directory's etcd takes only
// authenticated clients.
func (d *EtcdDirectory) AuthEnabled(ctx context.Context) (bool, error) {
	resp, err := d.cli.AuthStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("auth status: %w", authError(err))
	}
	return resp.Enabled, nil
}

// Empty reports whether the etcd cluster holds no key at all, under any
// prefix, and no user but RootUser: a directory no one has used yet, or
// one another router founding it with this one is closing right now.
func (d *EtcdDirectory) Empty(ctx context.Context) (bool, error) {
	resp, err := d.cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("count keys: %w", authError(err))
	}
	if resp.Count > 0 {
		return false, nil
	}
	users, err := d.cli.UserList(ctx)
	if err != nil {
		return false, fmt.Errorf("list users: %w", authError(err))
	}
	return len(users.Users) == 0 || slices.Equal(users.Users, []string{RootUser}), nil
}

// EnableAuth turns the directory's authentication on with RootUser's
// password: it adds the user (or finds it added, by another router
// closing the same directory), gives it the root role and enables
// authentication. The caller then opens a client WithPassword and checks
// it with CheckAuth: a root user someone else added first has another
// password, and that client is refused.
func (d *EtcdDirectory) EnableAuth(ctx context.Context, password string) error {
	users, err := d.cli.UserList(ctx)
	if err != nil {
		return fmt.Errorf("enable auth: list users: %w", authError(err))
	}
	if !slices.Contains(users.Users, RootUser) {
		if _, err := d.cli.UserAdd(ctx, RootUser, password); err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
			return fmt.Errorf("enable auth: add user %s: %w", RootUser, authError(err))
		}
	}
	if _, err := d.cli.UserGrantRole(ctx, RootUser, "root"); err != nil { // granted twice: etcd ignores it
		return fmt.Errorf("enable auth: grant %s the root role: %w", RootUser, authError(err))
	}
	if _, err := d.cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable auth: %w", authError(err))
	}
	return nil
}

// CheckAuth checks, over a client authenticated as RootUser, that the
// directory knows no user but RootUser and no role but root: no one added
// one of their own before its authentication was on.
func (d *EtcdDirectory) CheckAuth(ctx context.Context) error {
	users, err := d.cli.UserList(ctx)
	if err != nil {
		return fmt.Errorf("list users: %w", authError(err))
	}
	roles, err := d.cli.RoleList(ctx)
	if err != nil {
		return fmt.Errorf("list roles: %w", authError(err))
	}
	if !slices.Equal(users.Users, []string{RootUser}) || slices.ContainsFunc(roles.Roles, func(r string) bool { return r != "root" }) {
		return fmt.Errorf("%w: the directory knows users %v and roles %v, where fenec makes only user %s with role root: someone reached it before its authentication was on; remove them (etcdctl user delete, role delete) or start the directory again from an empty --etcd-dir",
			ErrAuth, users.Users, roles.Roles, RootUser)
	}
	return nil
}
