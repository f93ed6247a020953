//go:build nemesis

package store

import (
	"os"
	"sync"
	"testing"
)

// Under the nemesis tag every fsync of a tenant file that succeeded is
// told to the hook with the file's size as it began: under SyncAlways,
// after every append, the whole file; the file's first fsync comes
// before it is linked into place, under its side file's name.
func TestSyncHookSeesEverySync(t *testing.T) {
	var mu sync.Mutex
	var names []string
	var sizes []int64
	SyncHook = func(f *os.File, size int64) {
		mu.Lock()
		defer mu.Unlock()
		names, sizes = append(names, f.Name()), append(sizes, size)
	}
	t.Cleanup(func() { SyncHook = nil })
	path := tenantPath(t)
	l := mustCreate(t, path, Options{Sync: SyncAlways, Logger: quietLogger()})
	appendN(t, l, 3, 1, 100)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) < 4 || names[0] != path+".tmp" {
		t.Fatalf("fsyncs %v of %v: want the side file's, then one an append", sizes, names)
	}
	if last := sizes[len(sizes)-1]; last != st.Size() {
		t.Fatalf("last fsync saw %d bytes, the file has %d", last, st.Size())
	}
}
