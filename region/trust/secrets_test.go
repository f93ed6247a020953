package trust

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/testkit"
)

// keyFile writes a new directory key into dir and returns its path.
func keyFile(tb testing.TB, dir, name string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(global.NewKeyText()+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestFoundersTogetherNeedTheirFiles: a router founding a directory with
// other members refuses to start without the key and password files, and
// makes none; given both, or restarted on its member's data, or a
// region's (which makes none), it starts.
func TestFoundersTogetherNeedTheirFiles(t *testing.T) {
	founder := func(dir string) Config {
		c := Config{}
		c.Etcd = global.DefaultEmbedConfig(dir)
		c.Etcd.InitialCluster = "a=http://127.0.0.1:2380,b=http://127.0.0.1:2381"
		return c
	}
	dir := t.TempDir()
	_, err := Load(founder(dir), Deps{Log: testkit.Logger()})
	if !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), "--directory-key-file") {
		t.Fatalf("a founder without files: %v, want ErrSecrets naming the flags", err)
	}
	for _, f := range []string{KeyFileName, PasswordFileName} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused founder made %s: %v", f, err)
		}
	}

	given := founder(t.TempDir())
	given.KeyFile = keyFile(t, t.TempDir(), "key")
	given.PasswordFile = filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(given.PasswordFile, []byte(global.NewPasswordText()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(given, Deps{Log: testkit.Logger()}); err != nil {
		t.Fatalf("a founder with both files: %v", err)
	}

	restarted := founder(t.TempDir())
	if err := os.MkdirAll(filepath.Join(restarted.Etcd.Dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(restarted, Deps{Log: testkit.Logger()}); err != nil {
		t.Fatalf("a member restarted on its data: %v", err)
	}

	region := founder(t.TempDir())
	region.GlobalURLs = []string{"http://127.0.0.1:2379"}
	if _, err := Load(region, Deps{Log: testkit.Logger()}); err != nil {
		t.Fatalf("a region's router: %v", err)
	}
}

// TestLoadNeedsTheFilesGiven: a key or password file named and missing
// stops the start; the default ones in --etcd-dir may be missing (made
// later where the router may).
func TestLoadNeedsTheFilesGiven(t *testing.T) {
	alone := Config{}
	alone.Etcd = global.DefaultEmbedConfig(t.TempDir())
	if _, err := Load(alone, Deps{Log: testkit.Logger()}); err != nil {
		t.Fatalf("a router founding alone with no files yet: %v", err)
	}
	for _, c := range []Config{
		{DirectoryGiven: true, KeyFile: filepath.Join(t.TempDir(), "absent")},
		{DirectoryGiven: true, PasswordFile: filepath.Join(t.TempDir(), "absent")},
	} {
		if _, err := Load(c, Deps{Log: testkit.Logger()}); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v: %v, want the missing file", c, err)
		}
	}
	garbled := Config{DirectoryGiven: true, KeyFile: filepath.Join(t.TempDir(), "garbled")}
	if err := os.WriteFile(garbled.KeyFile, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(garbled, Deps{Log: testkit.Logger()}); err == nil {
		t.Error("a key file holding no key was taken")
	}
}

// sealing is a router's Trust over the key in keyPath and directory d,
// its changes written through d sealed under that key.
func sealing(tb testing.TB, id, keyPath string, d global.Directory, settled *int64) *Trust {
	tb.Helper()
	var tr *Trust
	tr, err := Load(Config{DirectoryGiven: true, KeyFile: keyPath}, Deps{
		Log:     testkit.Logger(),
		Go:      func(func(context.Context)) { tb.Error("a check put off on a directory that answers") },
		Changes: func(context.Context) (*global.Store, error) { return global.NewStore(tr.Seal(d)), nil },
		Settle:  func(_ context.Context, rev int64) { *settled = rev },
	})
	if err != nil {
		tb.Fatal(err)
	}
	tr.Named(id, testkit.Logger())
	return tr
}

// TestSealedUnderAnotherKeyRefused: a record in clear is sealed as the
// router with a key takes the lead, and its key noted; a router holding
// another key then refuses the directory, naming the file to copy and the
// router that has it; the router with the key, and one holding it behind
// a new one (a rotation), use it.
func TestSealedUnderAnotherKeyRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mem := global.NewMemory()
	if _, err := global.NewStore(mem).WriteNode(ctx, "n1", true, func(n *global.Node, _ bool) bool {
		*n = global.Node{Addr: "http://127.0.0.1:7071", Token: "node-token", Region: "eu"}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyA, keyB := keyFile(t, dir, "a.key"), keyFile(t, dir, "b.key")
	var settled int64
	a := sealing(t, "ra", keyA, mem, &settled)
	b := sealing(t, "rb", keyB, mem, new(int64))
	if err := b.CheckDirectory(ctx, mem); err != nil {
		t.Fatalf("records in clear, no key noted: %v", err)
	}

	a.SealClearNodes(ctx, mem)
	if settled == 0 {
		t.Fatal("the seal was not waited for")
	}
	kv, err := mem.Get(ctx, global.NodeKey("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kv.Value), "node-token") {
		t.Fatalf("the record still holds its token in clear: %s", kv.Value)
	}
	if err := a.CheckDirectory(ctx, mem); err != nil {
		t.Fatalf("the router with the key: %v", err)
	}
	err = b.CheckDirectory(ctx, mem)
	if !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), keyA) || !strings.Contains(err.Error(), "router ra") || !strings.Contains(err.Error(), "n1") {
		t.Fatalf("a router without the key: %v, want ErrSecrets naming %s, router ra and node n1", err, keyA)
	}

	rotated := filepath.Join(dir, "rotated.key")
	ka, _ := os.ReadFile(keyA)
	kb, _ := os.ReadFile(keyB)
	if err := os.WriteFile(rotated, append(kb, ka...), 0o600); err != nil {
		t.Fatal(err)
	}
	settled = 0
	c := sealing(t, "rc", rotated, mem, &settled)
	if err := c.CheckDirectory(ctx, mem); err != nil {
		t.Fatalf("a router holding the key behind a new one: %v", err)
	}
	c.SealClearNodes(ctx, mem) // sealed again under the new key, noted
	if settled == 0 {
		t.Fatal("a record sealed under the old key was not sealed again")
	}
	if err := b.CheckDirectory(ctx, mem); err != nil {
		t.Fatalf("the new key's holder once the rotation is done: %v", err)
	}
	if err := a.CheckDirectory(ctx, mem); !errors.Is(err, ErrSecrets) {
		t.Fatalf("the old key's holder once the rotation is done: %v, want ErrSecrets", err)
	}
}
