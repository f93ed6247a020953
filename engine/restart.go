package engine

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"

	"github.com/fenec-go/fenec/engine/store"
)

// A restore in place puts an image where a tenant's file was. The image
// ends at its seq; the file it replaces may have gone further, and clients
// hold positions in it (change cursors, Fenec-After with Fenec-History)
// and ids it gave. So the restored file starts a new history: it is
// written at a seq past both (store.Restart), with its own history from
// the image's seq on, and each collection's id counter at least the one
// the old file reached. Cursors and positions from before the restore are
// then refused, and no id is given twice.

// Marks are how far a tenant file went: its seq and, by collection name
// (dropped ones too), the last id it gave.
type Marks struct {
	Seq uint64
	IDs map[string]int64
}

// Marks returns how far the file went.
func (db *DB) Marks() Marks {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return Marks{Seq: db.log.Seq(), IDs: maps.Clone(db.st.counters)}
}

// Covers says whether m went at least as far as o in every mark.
func (m Marks) Covers(o Marks) bool {
	if m.Seq < o.Seq {
		return false
	}
	for k, v := range o.IDs {
		if m.IDs[k] < v {
			return false
		}
	}
	return true
}

// Restarted is where a restored file starts: its seq, and the history it
// forked, the last of its lineage.
type Restarted struct {
	Seq     uint64
	History uint64
	Lineage []LineageEntry
}

// WriteRestart writes db's state as a new tenant file at path (which must
// not exist), starting a new history past floor: an image at a seq past
// both db's and floor's, with each id counter raised to floor's, synced.
// db is left as it is. A failure leaves no file at path.
func (db *DB) WriteRestart(path string, floor Marks) (Restarted, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Restarted{}, fmt.Errorf("restart: %w", err)
	}
	out, err := db.writeRestart(f, floor)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return Restarted{}, fmt.Errorf("restart: %w", storeErr(err))
	}
	return out, nil
}

func (db *DB) writeRestart(w io.Writer, floor Marks) (Restarted, error) {
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return Restarted{}, ErrClosed
	}
	pos := store.Restart(db.log.Position(), floor.Seq)
	snap, err := db.snapshotLocked(db.mu.RUnlock) // the read lock is the snapshot's now
	if err != nil {
		db.mu.RUnlock()
		return Restarted{}, err
	}
	for k, v := range floor.IDs {
		snap.counters[k] = max(snap.counters[k], v)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := store.WriteImage(bw, pos, snap.write); err != nil {
		return Restarted{}, err // the snapshot's graphs finish on their own
	}
	if err := bw.Flush(); err != nil {
		return Restarted{}, err
	}
	out := Restarted{Seq: pos.Seq, History: pos.Lineage[len(pos.Lineage)-1].History}
	for _, e := range pos.Lineage {
		out.Lineage = append(out.Lineage, LineageEntry{History: e.History, From: e.From})
	}
	return out, nil
}

// ImageHead is where an image is, as its first bytes say: its seq and its
// lineage.
type ImageHead struct {
	Seq     uint64
	Lineage []LineageEntry
}

// LineageID is the image's first history, which names its lineage.
func (h ImageHead) LineageID() uint64 {
	if len(h.Lineage) == 0 {
		return 0
	}
	return h.Lineage[0].History
}

// ReadImageHead reads the first bytes of an image from r (the file's
// header and first frame, checked) and says where it is. It returns a
// reader giving the whole image again, to install it from. A stream that
// is not a fenec tenant file, or no image, is ErrBadImage having read no
// more than the header and a frame.
func ReadImageHead(r io.Reader) (io.Reader, ImageHead, error) {
	rest, pos, err := store.ReadImageHead(r)
	if err != nil {
		if errors.Is(err, store.ErrBadImage) {
			return nil, ImageHead{}, fmt.Errorf("not a tenant image: %w", err)
		}
		return nil, ImageHead{}, err
	}
	h := ImageHead{Seq: pos.Seq}
	for _, e := range pos.Lineage {
		h.Lineage = append(h.Lineage, LineageEntry{History: e.History, From: e.From})
	}
	return rest, h, nil
}
