package global

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyringSealsToTheRecord(t *testing.T) {
	k := testKeyring(t)
	sealed := k.Seal("n1", "https://10.0.0.5:7070", "id1", "admin-secret")
	if strings.Contains(sealed, "admin-secret") || !strings.HasPrefix(sealed, sealVersion) {
		t.Fatalf("sealed %q", sealed)
	}
	if got, err := k.Open("n1", "https://10.0.0.5:7070", "id1", sealed); err != nil || got != "admin-secret" {
		t.Fatalf("open: %q %v", got, err)
	}
	for _, tc := range []struct{ what, name, addr, id, sealed string }{
		{"another address", "n1", "https://10.6.6.6:7070", "id1", sealed},
		{"another name", "n2", "https://10.0.0.5:7070", "id1", sealed},
		{"another id", "n1", "https://10.0.0.5:7070", "id2", sealed},
		{"a byte changed", "n1", "https://10.0.0.5:7070", "id1", sealed[:len(sealed)-2] + "AA"},
		{"not sealed", "n1", "https://10.0.0.5:7070", "id1", "admin-secret"},
		{"cut short", "n1", "https://10.0.0.5:7070", "id1", sealVersion + "AAA"},
	} {
		if got, err := k.Open(tc.name, tc.addr, tc.id, tc.sealed); err == nil {
			t.Errorf("%s opened: %q", tc.what, got)
		}
	}
	if _, err := testKeyring(t).Open("n1", "https://10.0.0.5:7070", "id1", sealed); err == nil {
		t.Error("another key opened it")
	}
}

func TestKeyringRotation(t *testing.T) {
	old, next := NewKeyText(), NewKeyText()
	k1, err := ParseKeyring([]byte(old + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	sealed := k1.Seal("n1", "a", "", "tok")
	// The new key first, the old one after it: old seals still open, new
	// ones are sealed under the new key.
	k2, err := ParseKeyring([]byte("# rotated\n" + next + "\n\n" + old + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k2.Open("n1", "a", "", sealed); err != nil || got != "tok" {
		t.Fatalf("old seal under the rotated ring: %q %v", got, err)
	}
	if _, err := k1.Open("n1", "a", "", k2.Seal("n1", "a", "", "tok")); err == nil {
		t.Fatal("a seal under the new key opened with the old alone")
	}
}

func TestKeyFileRefusals(t *testing.T) {
	for _, body := range []string{"", "# only a comment\n", "not base64!\n", "c2hvcnQ=\n"} {
		if _, err := ParseKeyring([]byte(body)); !errors.Is(err, ErrKeyFile) {
			t.Errorf("%q: %v, want ErrKeyFile", body, err)
		}
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(NewKeyText()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyring(path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyring(path + ".missing"); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestSealingNodeRecords: through Sealing a node's token is written
// sealed and read opened; the raw directory never holds it; a record
// changed outside fenec, or one in clear, is read as not to be used.
func TestSealingNodeRecords(t *testing.T) {
	for _, impl := range implementations[:2] { // memory and etcd, under sealing here
		t.Run(impl.name, func(t *testing.T) { sealingNodeRecords(t, impl.open) })
	}
}

func sealingNodeRecords(t *testing.T, open func(testing.TB) Directory) {
	ctx := testCtx(t)
	raw := open(t)
	k := testKeyring(t)
	sealed := NewStore(Sealing(raw, k))
	n := Node{Addr: "https://10.0.0.5:7070", Token: "admin-secret", Region: "eu"}
	if _, err := sealed.Txn().PutNode("n1", 0, n).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	kv, err := raw.Get(ctx, NodeKey("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(kv.Value, []byte("admin-secret")) || !bytes.Contains(kv.Value, []byte(`"sealed"`)) {
		t.Fatalf("the directory holds %s", kv.Value)
	}
	got, err := sealed.GetNode(ctx, "n1")
	if err != nil || got.Value.Token != "admin-secret" || UsableNode(got.Value) != nil {
		t.Fatalf("read through sealing: %+v %v", got.Value, err)
	}
	nodes, _, err := sealed.ListNodes(ctx)
	if err != nil || nodes["n1"].Value.Token != "admin-secret" {
		t.Fatalf("listed: %+v %v", nodes, err)
	}

	// Pointed at another listener outside fenec: the seal no longer
	// opens, and the router is told not to use it.
	var m map[string]any
	if err := json.Unmarshal(kv.Value, &m); err != nil {
		t.Fatal(err)
	}
	m["addr"] = "https://attacker.example:443"
	b, _ := json.Marshal(m)
	if _, err := raw.Put(ctx, NodeKey("n1"), b); err != nil {
		t.Fatal(err)
	}
	got, err = sealed.GetNode(ctx, "n1")
	if err != nil || got.Value.Token != "" || !errors.Is(UsableNode(got.Value), ErrUntrusted) {
		t.Fatalf("a record pointed elsewhere: %+v %v", got.Value, err)
	}

	// Another node's seal copied in: does not open either.
	if _, err := sealed.Txn().PutNode("n2", 0, Node{Addr: "https://10.0.0.6:7070", Token: "other", Region: "eu"}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	kv2, _ := raw.Get(ctx, NodeKey("n2"))
	var m2 map[string]any
	_ = json.Unmarshal(kv2.Value, &m2)
	m["addr"], m["sealed"] = "https://10.0.0.5:7070", m2["sealed"]
	b, _ = json.Marshal(m)
	if _, err := raw.Put(ctx, NodeKey("n1"), b); err != nil {
		t.Fatal(err)
	}
	if got, _ := sealed.GetNode(ctx, "n1"); UsableNode(got.Value) == nil {
		t.Fatalf("n2's sealed token opened as n1's: %+v", got.Value)
	}

	// A token in clear (a record from before sealing): read, marked,
	// not used by a router with a key; a router without one reads it
	// as before.
	if _, err := raw.Put(ctx, NodeKey("n3"), []byte(`{"addr": "http://127.0.0.1:7072", "token": "plain", "region": "eu", "lease": false}`)); err != nil {
		t.Fatal(err)
	}
	got, err = sealed.GetNode(ctx, "n3")
	if err != nil || !got.Value.Clear || !errors.Is(UsableNode(got.Value), ErrUntrusted) {
		t.Fatalf("a record in clear, with a key: %+v %v", got.Value, err)
	}
	plain, err := NewStore(Sealing(raw, nil)).GetNode(ctx, "n3")
	if err != nil || plain.Value.Token != "plain" || UsableNode(plain.Value) != nil {
		t.Fatalf("a record in clear, without a key: %+v %v", plain.Value, err)
	}
	// Written again through sealing (the migration), it is sealed.
	if _, err := sealed.Txn().PutNode("n3", got.Rev, got.Value).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	kv3, _ := raw.Get(ctx, NodeKey("n3"))
	if bytes.Contains(kv3.Value, []byte("plain")) || bytes.Contains(kv3.Value, []byte("clear")) {
		t.Fatalf("migrated record: %s", kv3.Value)
	}
	if got, _ := sealed.GetNode(ctx, "n3"); got.Value.Token != "plain" || UsableNode(got.Value) != nil {
		t.Fatalf("migrated record read back: %+v", got.Value)
	}
}

func TestSealingWatchOpens(t *testing.T) {
	ctx := testCtx(t)
	raw := openMemory(t)
	d := Sealing(raw, testKeyring(t))
	w := StartWatcher(ctx, d, nil)
	defer w.Close()
	<-w.Ready()
	s := NewStore(d)
	rev, err := s.Txn().PutNode("n1", 0, Node{Addr: "https://10.0.0.5:7070", Token: "admin-secret", Region: "eu"}).Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WaitRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	n, ok := w.View().Node("n1")
	if !ok || n.Token != "admin-secret" || UsableNode(n) != nil {
		t.Fatalf("watched record: %+v %v", n, ok)
	}
}
