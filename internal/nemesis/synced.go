package nemesis

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A synced length is kept per file, by its device and inode: a tenant
// file's every inode is fsynced whole under its side file's name before
// it is linked or renamed into place, so the first record an inode gets
// is written before any tenant file is that inode, and a renamed file
// keeps its records.

// RecordSynced returns the engine's fsync hook writing into dir: given
// a file and its size as the fsync began, it records that size as the
// file's synced length (a write racing the fsync may or may not be on
// disk, so it counts as not).
func RecordSynced(dir string) func(f *os.File, size int64) {
	return func(f *os.File, size int64) {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return
		}
		p := filepath.Join(dir, key(st))
		tmp := p + ".tmp"
		if os.WriteFile(tmp, []byte(strconv.FormatInt(size, 10)), 0o644) == nil {
			_ = os.Rename(tmp, p)
		}
	}
}

func key(st unix.Stat_t) string {
	return strconv.FormatUint(uint64(st.Dev), 10) + "-" + strconv.FormatUint(st.Ino, 10)
}

// ErrNeverSynced: the file has no record: nothing fsynced it under the
// hook.
var ErrNeverSynced = errors.New("never synced under the hook")

// Synced is the synced length recorded for the file at path.
func Synced(dir, path string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(dir, key(st)))
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), ErrNeverSynced)
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// LoseUnsynced makes a power loss of the file at path, its process
// already dead: every byte past its synced length is cut, and garbage,
// if any, written after what is left (a torn write). It returns the
// bytes cut. A file never synced is left as it is (ErrNeverSynced).
func LoseUnsynced(dir, path string, garbage []byte) (int64, error) {
	synced, err := Synced(dir, path)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	keep := min(synced, st.Size())
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Truncate(keep); err != nil {
		return 0, err
	}
	if len(garbage) > 0 {
		if _, err := f.WriteAt(garbage, keep); err != nil {
			return 0, err
		}
	}
	return st.Size() - keep, nil
}
