package region

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// auditEntry is one line of the router's audit log: a change or a refusal
// on /_shard/.
type auditEntry struct {
	Time      time.Time `json:"time"`
	Router    string    `json:"router"`
	Who       string    `json:"who"`  // the client's address
	What      string    `json:"what"` // e.g. "place", "move", "delete_node", "promote", "auth"
	Path      string    `json:"path,omitempty"`
	Tenant    string    `json:"tenant,omitempty"`
	Node      string    `json:"node,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Outcome   string    `json:"outcome"` // "ok", or the error answered
	Status    int       `json:"status"`
}

// auditLog appends JSON lines to a file; a nil auditLog records nothing.
type auditLog struct {
	mu  sync.Mutex
	f   *os.File      // guarded by mu; nil once closed
	enc *json.Encoder // guarded by mu
}

// openAudit opens path for appending (nil, nil when path is empty).
func openAudit(path string) (*auditLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &auditLog{f: f, enc: json.NewEncoder(f)}, nil
}

// record writes one entry; an error writing it is returned for the caller
// to log.
func (a *auditLog) record(e auditEntry) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	if err := a.enc.Encode(e); err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

// close syncs and closes the file. Safe to call twice.
func (a *auditLog) close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.f = nil
	return err
}
