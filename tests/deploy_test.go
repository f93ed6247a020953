package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// TestDeployCertsReadableByTheContainers: deploy/certs.sh (build.sh runs
// it) makes the compose deployment's certificates and secrets with the
// directory its owner's alone and every file a service mounts readable by
// the containers' user (uid 65534: a bind-mounted secret keeps its host
// owner and mode), the CAs' keys excepted. A rotation as documented —
// deploy/certs.sh NAME — issues NAME's certificates again, a router's of
// both CAs, and leaves the new keys as readable; `fenec certs` alone
// writes them 0600, which the containers' user cannot read.
func TestDeployCertsReadableByTheContainers(t *testing.T) {
	certs := filepath.Join(t.TempDir(), "certs")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(context.Background(), "sh", append([]string{"../deploy/certs.sh"}, args...)...)
		cmd.Env = append(os.Environ(), "FENEC="+cluster.Bins().Fenec, "FENEC_CERTS="+certs)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("deploy/certs.sh %v: %v\n%s", args, err, out)
		}
	}
	modes := func() map[string]os.FileMode {
		t.Helper()
		entries, err := os.ReadDir(certs)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]os.FileMode{}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = info.Mode().Perm()
		}
		return out
	}
	check := func() {
		t.Helper()
		st, err := os.Stat(certs)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("the certificates' directory: %v %v, want 0700", st.Mode().Perm(), err)
		}
		for name, mode := range modes() {
			want := os.FileMode(0o644)
			if name == "ca-key.pem" || name == "etcd-ca-key.pem" {
				want = 0o600
			}
			if mode != want {
				t.Errorf("%s: mode %#o, want %#o", name, mode, want)
			}
		}
	}
	run()
	check()
	for _, want := range []string{"g1-etcd.pem", "g1-etcd-key.pem", "us3-etcd.pem", "n5-key.pem", "ap3-etcd.pem", "ap1-key.pem", "n7-key.pem", "prometheus.pem", "etcd-ca.pem", "directory.key", "directory.password"} {
		if _, ok := modes()[want]; !ok {
			t.Fatalf("deploy/certs.sh made no %s", want)
		}
	}
	if _, ok := modes()["n1-etcd.pem"]; ok {
		t.Fatal("a node holds a certificate of the directory's CA")
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(certs, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := map[string][]byte{}
	for _, f := range []string{"n1-key.pem", "g1-etcd-key.pem", "g1-key.pem", "n2-key.pem", "ca.pem", "etcd-ca.pem", "directory.key"} {
		before[f] = read(f)
	}
	run("n1", "g1")
	check()
	for f, b := range before {
		rotated := f == "n1-key.pem" || f == "g1-etcd-key.pem" || f == "g1-key.pem"
		if bytes.Equal(read(f), b) == rotated {
			t.Errorf("%s: rotated %v, want %v", f, !bytes.Equal(read(f), b), rotated)
		}
	}

	// A directory made before a service was added (region ap): run again,
	// certs.sh issues the missing ones under the same CAs and leaves the
	// others be.
	for _, f := range []string{"ap2.pem", "ap2-key.pem", "ap2-etcd.pem", "ap2-etcd-key.pem", "n6.pem", "n6-key.pem"} {
		if err := os.Remove(filepath.Join(certs, f)); err != nil {
			t.Fatal(err)
		}
	}
	kept := map[string][]byte{}
	for _, f := range []string{"ca.pem", "etcd-ca.pem", "ap1-etcd.pem", "n7-key.pem"} {
		kept[f] = read(f)
	}
	run()
	check()
	for _, f := range []string{"ap2.pem", "ap2-key.pem", "ap2-etcd.pem", "ap2-etcd-key.pem", "n6.pem", "n6-key.pem"} {
		if _, ok := modes()[f]; !ok {
			t.Errorf("deploy/certs.sh left %s missing", f)
		}
	}
	for f, b := range kept {
		if !bytes.Equal(read(f), b) {
			t.Errorf("deploy/certs.sh issued %s again, making only the missing ones", f)
		}
	}

	// fenec certs alone writes a key its owner's alone: the containers'
	// user could not read it.
	cmd := exec.Command(cluster.Bins().Fenec, "certs", "--out", certs, "n3")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fenec certs: %v %s", err, out)
	}
	if m := modes()["n3-key.pem"]; m&0o004 != 0 || !strings.HasPrefix(m.String(), "-rw-------") {
		t.Fatalf("fenec certs wrote n3-key.pem %v", m)
	}
}
