package lease

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// TermFileName is the file, in the directory a node passes, holding the
// highest term the node has taken. It cannot be mistaken for a tenant file
// (those end in .fenec).
const TermFileName = "lease.term"

// TermFile keeps a node's highest term in a file of its own, replaced
// atomically (written beside it, synced, renamed into place, the directory
// synced) so a crash leaves the old term or the new one, never neither.
type TermFile struct {
	dir string
}

// NewTermFile returns the term file in dir.
func NewTermFile(dir string) *TermFile { return &TermFile{dir: dir} }

// Path is where the term is kept.
func (f *TermFile) Path() string { return filepath.Join(f.dir, TermFileName) }

// Load reads the term; a missing file is term 0.
func (f *TermFile) Load() (uint64, error) {
	b, err := os.ReadFile(f.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read term: %w", err)
	}
	term, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse term file %s: %w", f.Path(), err)
	}
	return term, nil
}

// Store writes term durably. It is the persist callback NewNodeLease takes.
func (f *TermFile) Store(term uint64) error {
	tmp, err := os.CreateTemp(f.dir, TermFileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("write term: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone already once renamed
	if _, err := tmp.WriteString(strconv.FormatUint(term, 10) + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("write term: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync term: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close term: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path()); err != nil {
		return fmt.Errorf("rename term: %w", err)
	}
	d, err := os.Open(f.dir)
	if err != nil {
		return fmt.Errorf("open term dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync term dir: %w", err)
	}
	return nil
}
