package global

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fenec-go/fenec/internal/testkit"
	"github.com/fenec-go/fenec/internal/tlsx"
)

// plainMember starts a member on loopback http and waits for it.
func plainMember(t *testing.T) *Embedded {
	t.Helper()
	cfg := DefaultEmbedConfig(t.TempDir())
	cfg.ClientURL, cfg.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	m := startMember(t, cfg)
	waitReady(t, m)
	return m
}

// closeMember turns m's authentication on with password and returns a
// directory opened with it.
func closeMember(t *testing.T, m *Embedded, password string, opts ...EtcdOption) *EtcdDirectory {
	t.Helper()
	d, err := m.Open(testCtx(t), "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if empty, err := d.Empty(testCtx(t)); err != nil || !empty {
		t.Fatalf("a new member: empty %v, %v", empty, err)
	}
	if err := d.EnableAuth(testCtx(t), password); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, err = m.Open(testCtx(t), "", append(opts, WithPassword(password))...)
	if err != nil {
		t.Fatalf("open with the password: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.CheckAuth(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestClosedDirectoryTakesOnlyThePassword: once its authentication is on,
// the directory serves a client showing the password, and a client with
// none — etcdctl as any local user runs it — learns nothing and changes
// nothing; a wrong password is refused saying which file to give.
func TestClosedDirectoryTakesOnlyThePassword(t *testing.T) {
	m := plainMember(t)
	pw := NewPasswordText()
	d := closeMember(t, m, pw)
	if _, err := d.Put(testCtx(t), NodeKey("n1"), []byte(`{"addr":"http://127.0.0.1:1","region":"local"}`)); err != nil {
		t.Fatal(err)
	}
	if on, err := d.AuthEnabled(testCtx(t)); err != nil || !on {
		t.Fatalf("auth enabled %v, %v", on, err)
	}
	if got := testkit.EtcdStranger(t, m.ClientURLs(), nil); len(got) > 0 {
		t.Fatalf("a client with no password got:\n%s", strings.Join(got, "\n"))
	}
	kvs, _, err := d.List(testCtx(t), "")
	if err != nil || len(kvs) != 1 || kvs[0].Key != NodeKey("n1") {
		t.Fatalf("after the stranger the directory holds %v (%v)", kvs, err)
	}
	for _, opts := range [][]EtcdOption{nil, {WithPassword("not-it")}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := m.Open(ctx, "", opts...)
		cancel()
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "--directory-password-file") {
			t.Fatalf("opening with %d options: %v, want ErrAuth naming the file", len(opts), err)
		}
	}
}

// TestUserAddedBeforeAuthIsSeen: a user someone added while the directory
// was still open is found as the router closes it, not kept.
func TestUserAddedBeforeAuthIsSeen(t *testing.T) {
	m := plainMember(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: m.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.UserAdd(testCtx(t), "intruder", "x"); err != nil {
		t.Fatal(err)
	}
	d, err := m.Open(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if empty, _ := d.Empty(testCtx(t)); empty {
		t.Fatal("a directory with a user is taken for a new one")
	}
	pw := NewPasswordText()
	if err := d.EnableAuth(testCtx(t), pw); err != nil {
		t.Fatal(err)
	}
	dp, err := m.Open(testCtx(t), "", WithPassword(pw))
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if err := dp.CheckAuth(testCtx(t)); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "intruder") {
		t.Fatalf("check with an intruder's user: %v", err)
	}
}

// TestCertificateNamedRootIsNoOne: over TLS, a client certificate the
// member's CA issued under the name "root" — which etcd's
// client-cert-auth would take for the root user — reaches nothing
// without the password; the password over TLS does.
func TestCertificateNamedRootIsNoOne(t *testing.T) {
	p := testkit.NewPKI(t, "directory CA")
	m := tlsMember(t, "m1", p.Issue("m1"), nil, "http://127.0.0.1:0")
	waitReady(t, m)
	router := WithTLS(testkit.Source(t, p.Issue("router")).Etcd())
	pw := NewPasswordText()
	d := closeMember(t, m, pw, router)
	if _, err := d.Put(testCtx(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	root := testkit.Source(t, p.Issue("root")).Etcd()
	if got := testkit.EtcdStranger(t, m.ClientURLs(), root); len(got) > 0 {
		t.Fatalf("a certificate named root with no password got:\n%s", strings.Join(got, "\n"))
	}
	// Without the CA's certificate, not even the handshake.
	if got := testkit.EtcdStranger(t, m.ClientURLs(), testkit.Source(t, tlsx.Files{CA: p.Bundle()}).Etcd()); len(got) > 0 {
		t.Fatalf("a client with no certificate got:\n%s", strings.Join(got, "\n"))
	}
}

// TestFoundersCloseTogether: routers founding one directory close it at
// once with the same password: one that finds root already added by
// another still takes the directory for a new one and closes it; a root
// someone added with another password is found as the router opens the
// directory with its own.
func TestFoundersCloseTogether(t *testing.T) {
	m := plainMember(t)
	pw := NewPasswordText()
	first, err := m.Open(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := first.cli.UserAdd(testCtx(t), RootUser, pw); err != nil {
		t.Fatal(err)
	}
	if empty, err := first.Empty(testCtx(t)); err != nil || !empty {
		t.Fatalf("a directory whose root another founder added: empty %v, %v", empty, err)
	}
	closeMember(t, m, pw)

	other := plainMember(t)
	d, err := other.Open(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.cli.UserAdd(testCtx(t), RootUser, "someone else's"); err != nil {
		t.Fatal(err)
	}
	if err := d.EnableAuth(testCtx(t), pw); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := other.Open(ctx, "", WithPassword(pw)); !errors.Is(err, ErrAuth) {
		t.Fatalf("a root with another password: %v", err)
	}
}
