package engine

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/fenec-go/fenec/engine/store"
)

// The state payload of an image, streamed:
//
//	"FNI6"
//	counters: uvarint n, n × (string name, varint last id)
//	collections: uvarint n, n × (uvarint len, schema;
//	    graphs: uvarint g, g × (uvarint field, uvarint len, head,
//	        uvarint len, uvarint pad, pad × 0, section);
//	    uvarint docs, uvarint len, uvarint pad, pad × 0, documents section)
//
// The documents section is a table of ids and where each document's
// values end, then the values (doctable.go): an open checks the table and
// reads each document where the mapped file holds it, decoding it only
// when a read reaches it. A section not in a mapped file is read into
// memory and served the same way. No index but the graphs is written:
// each other one is built on its first use (collection.hashOf). Each
// HNSW graph travels as its head (levels, upper links, ids: hnsw's
// WriteHead, read into memory) and its section (every node's level-0
// list, an inverse norm per node for cosine, the tombstones' vectors:
// hnsw's WriteSection), and where each live node's vector's numbers lie
// among the documents section's values. Each live vector is held once,
// in its document: once the documents are in, the graph is given each
// one where the section places it (attachGraph), reading no document,
// and reads it there. A checkpoint writes
// each section in an image frame of its own starting at a multiple of
// store.SectionAlign in the file (pad says how far), so that an open
// serves the graph's lists from the mapped file where they lie rather
// than decoding them; a section not in a mapped file, or not aligned, is
// read into memory. Images streamed out (WriteImage: moves, backups,
// restores) are written as FNI2 (below), which carries each vector once
// as well and which older nodes read. Graphs are rebuilt from the
// documents only if they fail to load.
//
// Images of "FNI5" were laid out as FNI6 but for the places: each graph's
// section (a head of hnsw's version 3) did not say where its vectors lie,
// so an open reads every document to give the graph its own (its checks
// of each vector against its norm with it). They are read as they are,
// and written as FNI6 by the next checkpoint (an open does not rewrite
// the file, so logs no conversion). Images of "FNI4" were laid out as
// FNI5 but for the documents, which came one at a time as FNI2's do
// (below): read as they are, each document copied to memory, and written
// as FNI6 by the next checkpoint. Images of "FNI3" were laid out as
// FNI4, but each section held every
// node's vector too, normalised (a head of hnsw's version 2): read as
// they are, served from the mapped file. Images of "FNI2" carried each
// graph whole but for its live vectors (hnsw's WriteTo) ahead of its
// collection's documents, each document's vector put in its graph as it
// is read; "FNI1" carried the graphs after all the documents, as
//
//	graphs: uvarint n, n × (string coll, uvarint field, uvarint len, graph)
//
// Both are read still, into memory (FNI2 by a feed beside the reader:
// graphFeed). The next checkpoint of a file of any of them writes FNI6.
// Documents of any format but FNI6 and FNI5 come one at a time,
//
//	uvarint docs, docs × (uvarint len, varint id, uvarint values, values)
//
// so neither writing nor reading such an image holds it whole in memory.
// An image of a later format is refused with ErrNewerImage.
const (
	imageMagic   = "FNI6"
	imageMagicV5 = "FNI5"
	imageMagicV4 = "FNI4"
	imageMagicV3 = "FNI3"
	imageMagicV2 = "FNI2"
	imageMagicV1 = "FNI1"
)

// maxImageItem bounds one length-prefixed item of an image.
const maxImageItem = 1 << 30

// itemTrust is the longest item length the image reader allocates for
// before reading its bytes.
const itemTrust = 1 << 20

// Checkpoint writes the whole state, index graphs included, to a side file
// with the recent records kept for change cursors, and renames it into
// place.
func (db *DB) Checkpoint() error { return db.rewrite(false) }

// Compact is Checkpoint keeping no records from before the image.
func (db *DB) Compact() error { return db.rewrite(true) }

func (db *DB) rewrite(compact bool) error {
	// The read lock keeps the state still (no block lands) while reads go on.
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return ErrClosed
	}
	st, seq := db.st, db.log.Seq()
	snap, err := db.snapshotLocked(nil)
	if err != nil {
		db.mu.RUnlock()
		return fmt.Errorf("checkpoint: %w", err)
	}
	if compact {
		err = db.log.Compact(snap.write)
	} else {
		err = db.log.Checkpoint(snap.write)
	}
	var tabs map[string]*docTable
	if err == nil {
		tabs = db.mapImage(snap)
	}
	snap.wait()
	db.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", storeErr(err))
	}
	db.foldDocs(st, seq, tabs)
	return nil
}

// WriteImage streams a compact image of the whole tenant to w (what a move
// or a backup copies; Install takes it). Writes go on meanwhile.
func (db *DB) WriteImage(w io.Writer) (int64, error) {
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return 0, ErrClosed
	}
	pos := db.log.Position()
	snap, err := db.snapshotLocked(db.mu.RUnlock) // the read lock is the snapshot's now
	if err != nil {
		db.mu.RUnlock()
		return 0, fmt.Errorf("write image: %w", err)
	}
	n, err := store.WriteImage(w, pos, snap.write)
	if err != nil {
		return n, fmt.Errorf("write image: %w", storeErr(err))
	}
	return n, nil
}

// Install reads a whole image from r, verifies it by replaying it into a
// side file next to path, and renames it into place. path must not exist.
// A cut-short or damaged image is refused and leaves nothing behind.
func Install(path string, r io.Reader) error {
	_, err := store.Install(path, r, func(tmp string) error {
		db, err := Open(tmp, Options{NoSweep: true, Sync: SyncOff, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadImage, err)
		}
		return db.Close()
	})
	if err != nil {
		return fmt.Errorf("install image: %w", storeErr(err))
	}
	return nil
}

// InstallOpen installs an image read from r as a new file at path, as
// Install does, and returns it open with opts: the image is read once —
// every frame's checksum checked, the documents and graphs loaded — rather
// than opened to verify it, closed, and opened again. A damaged image is
// ErrBadImage and leaves no file.
func InstallOpen(path string, r io.Reader, opts Options) (*DB, error) {
	db := newDB(opts)
	l, _, err := store.InstallOpen(path, r, opts.storeOptions(), db.replayer())
	if err != nil {
		return nil, fmt.Errorf("install image: %w", storeErr(err))
	}
	db.log = l
	db.start()
	return db, nil
}
