package node

import (
	"fmt"
	"os"
	"sync"
)

// Directory syncs are shared: a node promoting or following many tenants
// at once removes or renames many files in its one directory, and each
// change needs an fsync of the directory that began after it. Callers at
// once share those fsyncs rather than queue one each behind the kernel's
// lock on the directory. A caller waits for the next fsync to begin after
// its call (never one already running, which may have missed its change)
// and returns that fsync's result, or a later one's: either began after
// its change.

// dirSyncs holds one dirSyncer per directory synced.
var dirSyncs sync.Map // string → *dirSyncer

// syncDir makes dir's entries durable.
func syncDir(dir string) error {
	v, ok := dirSyncs.Load(dir)
	if !ok {
		v, _ = dirSyncs.LoadOrStore(dir, newDirSyncer(dir, fsyncDir))
	}
	return v.(*dirSyncer).sync()
}

// fsyncDir is one fsync of a directory.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// dirSyncer shares one directory's fsyncs among the callers waiting.
type dirSyncer struct {
	dir   string
	fsync func(string) error

	mu      sync.Mutex
	cond    *sync.Cond
	running bool   // guarded by mu: an fsync is under way
	started uint64 // guarded by mu: fsyncs begun
	done    uint64 // guarded by mu: fsyncs ended (the last one begun ended)
	err     error  // guarded by mu: the result of fsync number done
}

func newDirSyncer(dir string, fsync func(string) error) *dirSyncer {
	s := &dirSyncer{dir: dir, fsync: fsync}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// sync returns once an fsync begun after the call has ended, with its
// result; the caller runs it itself if no one else is.
func (s *dirSyncer) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := s.started + 1 // the next to begin; one running now may miss our change
	for s.done < want {
		if s.running {
			s.cond.Wait()
			continue
		}
		s.running = true
		s.started++
		n := s.started
		s.mu.Unlock()
		err := s.fsync(s.dir)
		s.mu.Lock()
		s.running = false
		s.done, s.err = n, err
		s.cond.Broadcast()
	}
	return s.err
}
