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
// node's binding: the highest term it has taken, the directory it took it
// from and the epoch. It cannot be mistaken for a tenant file (those end in
// .fenec).
const TermFileName = "lease.term"

// TermFile keeps a node's binding in a file of its own, one line
// "<term> <dir> <epoch>" (a file of a node from before bindings holds the
// term alone), replaced atomically (written beside it, synced, renamed
// into place, the directory synced) so a crash leaves the old binding or
// the new one, never neither.
type TermFile struct {
	dir string
}

// NewTermFile returns the term file in dir.
func NewTermFile(dir string) *TermFile { return &TermFile{dir: dir} }

// Path is where the term is kept.
func (f *TermFile) Path() string { return filepath.Join(f.dir, TermFileName) }

// Load reads the binding; a missing file is the zero Binding (never
// leased), one holding a term alone is bound to no directory yet.
func (f *TermFile) Load() (Binding, error) {
	b, err := os.ReadFile(f.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return Binding{}, nil
	}
	if err != nil {
		return Binding{}, fmt.Errorf("read term: %w", err)
	}
	fields := strings.Fields(string(b))
	bad := func(err error) (Binding, error) {
		return Binding{}, fmt.Errorf("parse term file %s: %w", f.Path(), err)
	}
	if len(fields) != 1 && len(fields) != 3 {
		return bad(fmt.Errorf("%d fields", len(fields)))
	}
	var out Binding
	if out.Term, err = strconv.ParseUint(fields[0], 10, 64); err != nil {
		return bad(err)
	}
	if len(fields) == 3 {
		out.Dir = fields[1]
		if out.Epoch, err = strconv.ParseUint(fields[2], 10, 64); err != nil {
			return bad(err)
		}
	}
	return out, nil
}

// Store writes b durably. It is the persist callback NewNodeLease takes.
func (f *TermFile) Store(b Binding) error {
	line := strconv.FormatUint(b.Term, 10)
	if b.Dir != "" {
		if strings.ContainsAny(b.Dir, " \t\n") {
			return fmt.Errorf("write term: directory name %q", b.Dir)
		}
		line += " " + b.Dir + " " + strconv.FormatUint(b.Epoch, 10)
	}
	tmp, err := os.CreateTemp(f.dir, TermFileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("write term: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone already once renamed
	if _, err := tmp.WriteString(line + "\n"); err != nil {
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
