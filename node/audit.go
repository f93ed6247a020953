package node

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// auditEntry is one line of the audit log.
type auditEntry struct {
	Time      time.Time `json:"time"`
	Who       string    `json:"who"`           // client address
	Via       string    `json:"via,omitempty"` // the router's, for a request it forwarded
	What      string    `json:"what"`          // refusal or change: "unauthorized", "create", ...
	Tenant    string    `json:"tenant,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Status    int       `json:"status"`
	Detail    string    `json:"detail,omitempty"`
}

// auditLog appends JSON lines to a file; a nil *auditLog records nothing.
type auditLog struct {
	mu sync.Mutex // guards f and closed
	f  *os.File
	// closed is set by Close; later records are dropped.
	closed bool
}

func openAudit(path string) (*auditLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &auditLog{f: f}, nil
}

// record appends e as one line.
func (a *auditLog) record(e auditEntry) error {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	if _, err := a.f.Write(b); err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

// Close syncs and closes the file. Safe to call twice.
func (a *auditLog) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	serr := a.f.Sync()
	cerr := a.f.Close()
	if serr != nil {
		return fmt.Errorf("sync audit log: %w", serr)
	}
	return cerr
}
