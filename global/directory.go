package global

import (
	"context"
	"fmt"
)

// KV is one key with its value and the revision of its last change.
type KV struct {
	Key    string
	Value  []byte
	ModRev int64 // revision of the key's last put; > 0 for a present key
}

// Cond is one condition of a transaction: the key's mod revision equals
// ModRev. ModRev 0 means the key is absent.
type Cond struct {
	Key    string
	ModRev int64
}

// IfModRev is the condition "key was last changed at revision rev".
func IfModRev(key string, rev int64) Cond { return Cond{Key: key, ModRev: rev} }

// IfAbsent is the condition "key does not exist".
func IfAbsent(key string) Cond { return Cond{Key: key} }

// Op is one write of a transaction: a put of Value, or a delete.
type Op struct {
	Key    string
	Value  []byte
	Delete bool
}

// OpPut writes value at key.
func OpPut(key string, value []byte) Op { return Op{Key: key, Value: value} }

// OpDelete removes key (nothing if absent).
func OpDelete(key string) Op { return Op{Key: key, Delete: true} }

// EventType says what an event did to its key.
type EventType int

const (
	// EventPut is a put; Event.KV holds the new value.
	EventPut EventType = iota + 1
	// EventDelete is a delete; Event.KV holds the key and ModRev the
	// revision of the delete, no value.
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change seen by a watch. All events of one transaction carry
// the same revision (KV.ModRev).
type Event struct {
	Type EventType
	KV   KV
}

// WatchResponse is one batch of events in revision order, or an error. After
// a response with Err set the channel is closed; Err is ErrCompacted when the
// revision asked for is gone (list again and watch from the list's revision).
type WatchResponse struct {
	Events   []Event
	Revision int64 // the directory's revision when the batch was cut
	Err      error
}

// Directory is a versioned key/value store under a prefix: keys given to and
// returned by it are relative to that prefix. Revisions are shared by all
// keys of the store (an etcd cluster's revisions count every key, not only
// this prefix's), increase with each change, and are never reused.
//
// Every method that blocks takes a context first. Implementations are safe
// for concurrent use.
type Directory interface {
	// Get returns key's value and mod revision, ErrNotFound if absent.
	Get(ctx context.Context, key string) (KV, error)
	// List returns every key starting with prefix, in key order, and the
	// revision the list was read at: watch after it to miss nothing.
	List(ctx context.Context, prefix string) ([]KV, int64, error)
	// Put writes key and returns the revision of the write.
	Put(ctx context.Context, key string, value []byte) (int64, error)
	// Delete removes key (nothing if absent) and returns the directory's
	// revision after it.
	Delete(ctx context.Context, key string) (int64, error)
	// Txn applies ops if every cond holds, all or nothing, and returns the
	// revision after it. A failed condition is ErrConflict and writes
	// nothing.
	Txn(ctx context.Context, conds []Cond, ops []Op) (int64, error)
	// Watch sends every change to keys starting with prefix made after
	// revision after, in order, until ctx ends or the directory is closed,
	// and then closes the channel. A compacted revision is reported as a
	// response with Err = ErrCompacted.
	Watch(ctx context.Context, prefix string, after int64) (<-chan WatchResponse, error)
	// Compact discards history before revision rev: a watch that would
	// start before rev fails with ErrCompacted.
	Compact(ctx context.Context, rev int64) error
	// Close stops every watch and releases the directory. Safe to call
	// more than once.
	Close() error
}
