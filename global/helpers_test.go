package global

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// testTimeout bounds every wait in this package's tests; it is a bound on a
// hang, never an assertion about speed.
const testTimeout = 30 * time.Second

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// shared is one embedded etcd member for every test that only needs a
// directory: each gets a prefix of its own, so they do not see each other's
// keys (revisions are shared, which the tests never assume otherwise).
var shared struct {
	once sync.Once
	dir  string
	m    *Embedded
	err  error
	seq  atomic.Int64
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.m != nil {
		shared.m.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	if code == 0 {
		// etcd's members talk to each other over net/http, whose pooled
		// connections between stopped members close on their own schedule;
		// this package's code uses no net/http.
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
			goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedMember returns the package's shared embedded member, started on
// first use.
func sharedMember(t testing.TB) *Embedded {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "fenec-global-etcd-")
		if shared.err != nil {
			return
		}
		cfg := DefaultEmbedConfig(shared.dir)
		cfg.ClientURL, cfg.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
		shared.m, shared.err = StartEmbedded(context.Background(), cfg)
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shared.err = shared.m.WaitReady(ctx)
	})
	if shared.err != nil {
		t.Fatalf("shared embedded etcd: %v", shared.err)
	}
	return shared.m
}

// openShared opens a directory with a fresh prefix on the shared member,
// closed at the test's end.
func openShared(t testing.TB) *EtcdDirectory {
	t.Helper()
	m := sharedMember(t)
	prefix := fmt.Sprintf("/test/%d/", shared.seq.Add(1))
	d, err := m.Open(testCtx(t), prefix)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func openMemory(t testing.TB) Directory {
	t.Helper()
	d := NewMemory()
	t.Cleanup(func() { d.Close() })
	return d
}

// implementations are the directories the shared suites run against.
var implementations = []struct {
	name string
	open func(t testing.TB) Directory
}{
	{"memory", openMemory},
	{"etcd", func(t testing.TB) Directory { return openShared(t) }},
	// Sealing must be a directory like the others: the suites run over
	// it too.
	{"sealing", func(t testing.TB) Directory { return Sealing(openMemory(t), testKeyring(t)) }},
}

// testKeyring is a keyring of one new key.
func testKeyring(t testing.TB) *Keyring {
	t.Helper()
	k, err := ParseKeyring([]byte(NewKeyText() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// forEachDirectory runs fn as a subtest against every implementation.
func forEachDirectory(t *testing.T, fn func(t *testing.T, open func(t testing.TB) Directory)) {
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) { fn(t, impl.open) })
	}
}
