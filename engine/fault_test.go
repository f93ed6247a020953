package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
)

// faultTenant is a tenant of 3 000 documents served from its image's
// table (checkpointed, reopened), and its file's path.
func faultTenant(t *testing.T) (*DB, string) {
	t.Helper()
	db, path := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection p (n int @sorted, k text @hash, body text)")
	var docs []any
	for i := range 3000 {
		docs = append(docs, map[string]any{"n": int64(i), "k": fmt.Sprintf("k%d", i%50), "body": fmt.Sprintf("document %d of the tenant, long enough to fill pages", i)})
	}
	mustExec(t, db, "put p $1", docs)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	t.Cleanup(func() { db.Close() })
	db.mu.RLock()
	base := db.st.colls["p"].base
	db.mu.RUnlock()
	if base == nil || base.hold == nil || base.n != 3000 {
		t.Fatal("the documents are not served from the mapped file")
	}
	return db, path
}

// The tenant file shortened under an open tenant by another program (the
// flock does not stop truncate(2)) makes every path that reads a mapped
// document fail with ErrFault, not the process die of SIGBUS: a read, a
// write that replaces a document, an index built on first use, a read's
// rows encoded after its lock, a checkpoint. Nothing a failed write did
// lands, and the tenant still closes.
func TestDocumentsReadFromAShortenedFile(t *testing.T) {
	db, path := faultTenant(t)
	ctx := context.Background()
	stream, _, err := db.ReadStream(ctx, Statement{Query: "get p select n, body where n >= 2000"}, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stream.lazy == nil {
		t.Fatal("the read's rows were encoded under its lock")
	}
	seq := db.Seq()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"get p select n, body where n = 2500",    // a range (@sorted built now) and a document read
		"get p count where k = 'k7'",             // @hash built now
		"get p select body limit 3",              // a scan
		"set p {body: 'changed'} where n = 2999", // a write replacing a document
		"del p where n < 10",
	} {
		if _, _, err := db.Exec(ctx, Statement{Query: q}); !errors.Is(err, ErrFault) {
			t.Fatalf("%s on a shortened file: %v, want ErrFault", q, err)
		}
	}
	if db.Seq() != seq {
		t.Fatalf("a write that faulted landed: seq %d, was %d", db.Seq(), seq)
	}
	enc := stream.Encoder()
	for done := false; !done; {
		_, done = enc.Next(nil, 4096)
	}
	if !errors.Is(enc.Err(), ErrFault) {
		t.Fatalf("rows encoded from a shortened file: %v, want ErrFault", enc.Err())
	}
	if _, err := db.WriteImage(io.Discard); !errors.Is(err, ErrFault) {
		t.Fatalf("image of a shortened file: %v, want ErrFault", err)
	}
	if err := db.Checkpoint(); !errors.Is(err, ErrFault) {
		t.Fatalf("checkpoint of a shortened file: %v, want ErrFault", err)
	}
	if err := db.Close(); err != nil && !errors.Is(err, ErrFault) {
		t.Fatalf("close: %v", err)
	}
}
