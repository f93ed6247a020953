package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Entry is one line of the log. Which fields a line holds is the
// writer's: a node writes via and detail, a router router, path, node and
// outcome.
type Entry struct {
	Time      time.Time `json:"time"`
	Router    string    `json:"router,omitempty"` // the router writing it
	Who       string    `json:"who"`              // the client
	Via       string    `json:"via,omitempty"`    // the router a node's request came through
	What      string    `json:"what"`             // the change, or the kind of refusal
	Path      string    `json:"path,omitempty"`
	Tenant    string    `json:"tenant,omitempty"`
	Node      string    `json:"node,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Outcome   string    `json:"outcome,omitempty"` // "ok", or the error answered
	Status    int       `json:"status"`
	Detail    string    `json:"detail,omitempty"`
	// Repeated, on a line that ends a window, is how many more refusals
	// of its client, kind and status the window had after the one
	// written whole; Since is when the first of them came.
	Repeated int        `json:"repeated,omitempty"`
	Since    *time.Time `json:"since,omitempty"`
}

// Bounds of a line.
const (
	// MaxField is the most bytes of a short field (who, path, tenant,
	// request id, ...) written; past it the field is cut, with a marker.
	MaxField = 200
	// MaxText is the same for an outcome or a detail (an error's text).
	MaxText = 800
	// MaxLine bounds a whole line, newline included: every field at its
	// bound, each of its bytes escaped (a quote or a backslash is two).
	MaxLine = 8 << 10
)

// Options adjust a Log; the zero value is the defaults.
type Options struct {
	// Mode is the file's mode when it is created (default 0600).
	Mode os.FileMode
	// Window is how long refusals are counted before their counts are
	// written (default a minute).
	Window time.Duration
	// MaxClients bounds the distinct (client, kind, status) counted in a
	// window (default 1024); refusals past it are counted as one.
	MaxClients int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

const (
	defaultWindow     = time.Minute
	defaultMaxClients = 1024
	// othersWho is the who of the line counting refusals of clients past
	// MaxClients in a window.
	othersWho = "(others)"
)

// Log appends JSON lines to a file. A nil *Log records nothing.
type Log struct {
	opts Options
	stop chan struct{} // closed by Close: the window's goroutine ends
	wg   sync.WaitGroup

	mu      sync.Mutex
	f       *os.File            // guarded by mu; nil once closed
	closing bool                // guarded by mu: Close has begun
	buf     bytes.Buffer        // guarded by mu: the line being written
	counts  map[tallyKey]*tally // guarded by mu: this window's refusals
	others  tally               // guarded by mu: those past MaxClients
}

// tallyKey is what refusals are counted by.
type tallyKey struct {
	who, what string
	status    int
}

// tally is the refusals of one key past the first in a window.
type tally struct {
	n     int
	since time.Time
}

// Open opens path for appending (nil, nil when path is empty) and starts
// the goroutine that writes each window's counts; Close stops it.
func Open(path string, o Options) (*Log, error) {
	if path == "" {
		return nil, nil
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.Window <= 0 {
		o.Window = defaultWindow
	}
	if o.MaxClients <= 0 {
		o.MaxClients = defaultMaxClients
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, o.Mode)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l := &Log{opts: o, f: f, stop: make(chan struct{}), counts: map[tallyKey]*tally{}}
	l.wg.Go(l.windows)
	return l, nil
}

// windows writes the counts at the end of every window until Close.
func (l *Log) windows() {
	t := time.NewTicker(l.opts.Window)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			_ = l.Flush() // an error writing is the next Record's to report
		}
	}
}

// Record writes e whole, as one line: a change, a forced operation. A
// zero Time is now.
func (l *Log) Record(e Entry) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeLocked(e)
}

// Refused counts a refusal of client (the key its refusals are counted
// by: an address, an IPv6 /64): the first of its kind and status in a
// window is written whole, the rest counted into one line at the
// window's end.
func (l *Log) Refused(client string, e Entry) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := tallyKey{who: client, what: e.What, status: e.Status}
	if t, ok := l.counts[k]; ok {
		t.count(l.opts.Now())
		return nil
	}
	if len(l.counts) >= l.opts.MaxClients {
		l.others.count(l.opts.Now())
		return nil
	}
	l.counts[k] = &tally{}
	return l.writeLocked(e)
}

func (t *tally) count(now time.Time) {
	if t.n == 0 {
		t.since = now
	}
	t.n++
}

// Flush ends the window now: every count is written, one line each, and
// counting starts again.
func (l *Log) Flush() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	now := l.opts.Now()
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for k, t := range l.counts {
		if t.n > 0 {
			since := t.since
			keep(l.writeLocked(Entry{Time: now, Who: k.who, What: k.what, Status: k.status, Repeated: t.n, Since: &since}))
		}
	}
	if l.others.n > 0 {
		since := l.others.since
		keep(l.writeLocked(Entry{Time: now, Who: othersWho, What: "refused",
			Detail:   fmt.Sprintf("refusals of clients past the %d this window counted one by one", l.opts.MaxClients),
			Repeated: l.others.n, Since: &since}))
	}
	clear(l.counts)
	l.others = tally{}
	return first
}

// writeLocked appends e as one bounded line.
func (l *Log) writeLocked(e Entry) error {
	if l.f == nil {
		return nil
	}
	if e.Time.IsZero() {
		e.Time = l.opts.Now()
	}
	e.Time = e.Time.UTC()
	bound(&e)
	l.buf.Reset()
	enc := json.NewEncoder(&l.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return fmt.Errorf("encode audit line: %w", err)
	}
	if _, err := l.f.Write(l.buf.Bytes()); err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

// Close writes the window's counts, syncs and closes the file. Safe to
// call twice; records after it are dropped.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return nil
	}
	l.closing = true
	close(l.stop)
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	ferr := l.flushLocked()
	serr := l.f.Sync()
	cerr := l.f.Close()
	l.f = nil
	if ferr != nil {
		return ferr
	}
	if serr != nil {
		return fmt.Errorf("sync audit log: %w", serr)
	}
	return cerr
}
