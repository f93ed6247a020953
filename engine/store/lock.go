package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// registry holds the paths this process has open (or is creating or
// installing), so a second Open in the same process is refused whatever
// flock would say.
var registry = struct {
	sync.Mutex
	paths map[string]struct{}
}{paths: map[string]struct{}{}}

func absPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve path: %w", err)
	}
	return abs, nil
}

// register claims path for this process; the returned func gives it back.
func register(path string) (func(), error) {
	registry.Lock()
	defer registry.Unlock()
	if _, ok := registry.paths[path]; ok {
		return nil, fmt.Errorf("%s: %w (in this process)", path, ErrLocked)
	}
	registry.paths[path] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			registry.Lock()
			delete(registry.paths, path)
			registry.Unlock()
		})
	}, nil
}

// flock takes an exclusive flock on f without waiting.
func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return fmt.Errorf("%s: %w", f.Name(), ErrLocked)
		default:
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
	}
}

// sameFile reports whether f is still the file at path (a checkpoint may
// have renamed another over it between open and flock).
func sameFile(f *os.File, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		return false, fmt.Errorf("stat: %w", err)
	}
	if err := unix.Stat(path, &b); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("stat: %w", err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// fileMode is every file's mode: a tenant's rows are its owner's alone.
const fileMode = 0o600

// private makes f its owner's alone where it was not (a file made before
// files were made 0600, or copied in with another mode).
func private(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode().Perm() == fileMode {
		return nil
	}
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	return nil
}

// openLocked opens path read-write and takes its flock, making sure the
// locked file is the one at path.
func openLocked(path string) (*os.File, error) {
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: %w", path, ErrNotExist)
			}
			return nil, fmt.Errorf("open: %w", err)
		}
		if err := flock(f); err != nil {
			f.Close()
			return nil, err
		}
		same, err := sameFile(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		if same {
			if err := private(f); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		f.Close() // renamed over while we locked it: look again
	}
	return nil, fmt.Errorf("%s: %w (replaced while opening)", path, ErrLocked)
}

// openSide opens (creating) a side file, takes its flock and empties it.
// It is its owner's alone (0600), as the file it becomes: one a crash
// left readable by others is made so too.
func openSide(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("create side file: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := private(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate side file: %w", err)
	}
	return f, nil
}

// removeLeftover removes a side file a crash left, unless someone holds it.
func removeLeftover(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("open leftover: %w", err)
	}
	defer f.Close()
	if err := flock(f); err != nil {
		return false, nil // in use: not a leftover
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("remove leftover: %w", err)
	}
	return true, nil
}

// syncDir fsyncs the directory holding path, so a rename or link in it
// is on disk.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("open dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// datasync flushes f's data (and the size needed to read it).
func datasync(f *os.File) error {
	size := sizeForHook(f)
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil {
			noteSynced(f, size)
		}
		return err
	}
}

// fileRef is an open tenant file shared by the Log and the readers and
// syncs that use it; the last release closes it (and drops its flock).
type fileRef struct {
	f    *os.File
	refs atomic.Int32
}

func newFileRef(f *os.File) *fileRef {
	r := &fileRef{f: f}
	r.refs.Store(1)
	return r
}

func (r *fileRef) acquire() *fileRef {
	r.refs.Add(1)
	return r
}

func (r *fileRef) release() error {
	if r.refs.Add(-1) == 0 {
		return r.f.Close()
	}
	return nil
}
