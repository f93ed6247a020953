package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/jsonerr"
	"github.com/fenec-go/fenec/wire"
)

// quotaExt ends the file beside a tenant's that keeps its quota.
const quotaExt = ".quota"

// Quota is a tenant's limits, kept beside its file; a zero field does not
// limit. Bytes and rows are asked as a block lands (507 past them),
// streams and requests as they open (429), and the rates are token
// buckets a landing write is charged to (429 while one is in debt).
// Usage is what a tenant holds. Both are the admin API's (package wire).
type (
	Quota = wire.Quota
	Usage = wire.Usage
)

// rateLimited is a write refused while a rate bucket is in debt.
type rateLimited struct {
	what  string
	retry time.Duration
}

func (e *rateLimited) Error() string             { return ErrRateLimited.Error() + ": " + e.what }
func (e *rateLimited) Is(target error) bool      { return target == ErrRateLimited }
func (e *rateLimited) RetryAfter() time.Duration { return e.retry }

// bucket is a token bucket holding a second's worth at rate; it may go
// into debt, which later writes wait out.
type bucket struct {
	tokens float64
	last   time.Time
}

// fill adds what rate earned since last, up to a second's worth.
func (b *bucket) fill(now time.Time, rate float64) {
	if b.last.IsZero() {
		b.tokens, b.last = rate, now
		return
	}
	b.tokens = min(rate, b.tokens+rate*now.Sub(b.last).Seconds())
	b.last = now
}

// rateBuckets are a tenant's rows and bytes buckets.
type rateBuckets struct {
	mu    sync.Mutex // guards rows, bytes
	rows  bucket
	bytes bucket
}

// charge lets a landing write through while the rows bucket holds a
// row's worth and the bytes bucket any bytes, and charges it in full.
func (r *rateBuckets) charge(now time.Time, q *Quota, rows, size int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q.RowsPerS > 0 && rows > 0 {
		r.rows.fill(now, q.RowsPerS)
		if r.rows.tokens < 1 {
			return &rateLimited{what: "rows_per_s", retry: debt(1-r.rows.tokens, q.RowsPerS)}
		}
	}
	if q.BytesPerS > 0 {
		r.bytes.fill(now, q.BytesPerS)
		if r.bytes.tokens <= 0 {
			return &rateLimited{what: "bytes_per_s", retry: debt(-r.bytes.tokens, q.BytesPerS)}
		}
	}
	if q.RowsPerS > 0 && rows > 0 {
		r.rows.tokens -= float64(rows)
	}
	if q.BytesPerS > 0 {
		r.bytes.tokens -= float64(size)
	}
	return nil
}

// debt is how long a bucket takes to earn back n at rate.
func debt(n, rate float64) time.Duration {
	return time.Duration(n / rate * float64(time.Second))
}

// checkQuota is the engine's quota hook: the node's memory ceiling and
// the tenant's own quota, asked as a block lands.
func (t *tenant) checkQuota(a engine.QuotaAsk) error {
	if a.Rollback {
		return nil
	}
	if max := t.reg.maxMemory; max > 0 && t.mem.Load() > max {
		return ErrMemoryFull
	}
	q := t.quota.Load()
	if q == nil {
		return nil
	}
	if q.Bytes > 0 && a.FileBytes+a.RecordBytes > q.Bytes {
		return ErrQuotaBytes
	}
	if q.Rows > 0 && a.AddRows > 0 && a.Rows+a.AddRows > q.Rows {
		return ErrQuotaRows
	}
	if q.RowsPerS > 0 || q.BytesPerS > 0 {
		return t.rates.charge(time.Now(), q, max(a.AddRows, 0), a.RecordBytes)
	}
	return nil
}

// maxStreams is the tenant's subscription bound: the node's, or its
// quota's if lower.
func (t *tenant) maxStreams(node int) int {
	if q := t.quota.Load(); q != nil && q.Streams > 0 && q.Streams < int64(node) {
		return int(q.Streams)
	}
	return node
}

// enter counts a data request against the requests quota; the returned
// func lets it go.
func (t *tenant) enter() (func(), error) {
	n := t.active.Add(1)
	if q := t.quota.Load(); q != nil && q.Requests > 0 && n > q.Requests {
		t.active.Add(-1)
		return nil, fmt.Errorf("%w: requests", ErrTooManyRequests)
	}
	return func() { t.active.Add(-1) }, nil
}

// quotaPath is the file keeping a tenant's quota.
func (r *registry) quotaPath(name string) string {
	return filepath.Join(r.dir, name+quotaExt)
}

// loadQuota reads a tenant's kept quota, if any.
func (r *registry) loadQuota(t *tenant) error {
	b, err := os.ReadFile(r.quotaPath(t.name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read quota: %w", err)
	}
	var q Quota
	if err := json.Unmarshal(b, &q); err != nil {
		return fmt.Errorf("read quota %s: %w", r.quotaPath(t.name), err)
	}
	t.quota.Store(&q)
	return nil
}

// storeQuota keeps q beside the tenant's file (written whole, then
// renamed into place) and makes it the tenant's.
func (r *registry) storeQuota(t *tenant, q Quota) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(r.dir, t.name+quotaExt+".*.tmp")
	if err != nil {
		return fmt.Errorf("write quota: %w", err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write quota: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.quotaPath(t.name)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write quota: %w", err)
	}
	t.quota.Store(&q)
	return nil
}

// dropQuota removes a tenant's kept quota (a delete, or a new tenant
// made under an old name).
func (r *registry) dropQuota(name string) error {
	if err := os.Remove(r.quotaPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove quota: %w", err)
	}
	return nil
}

// adminQuota serves PUT and GET /_admin/tenants/<t>/quota and GET
// .../usage.
func (c *call) adminQuota(name string, usage bool) {
	c.route = "admin_quota"
	allowed := []string{http.MethodGet, http.MethodPut}
	if usage {
		c.route, allowed = "admin_usage", []string{http.MethodGet}
	}
	if !c.method(allowed...) {
		return
	}
	t, err := c.s.reg.acquire(c.r.Context(), name)
	if err != nil {
		c.fail(err)
		return
	}
	defer c.s.reg.release(t)
	switch {
	case usage:
		t.mu.Lock()
		streams := len(t.subs)
		t.mu.Unlock()
		writeJSON(c.w, http.StatusOK, Usage{
			Bytes: t.db.FileBytes(), Rows: t.db.Rows(), Streams: int64(streams), Requests: t.active.Load(),
		})
	case c.r.Method == http.MethodGet:
		q := Quota{}
		if p := t.quota.Load(); p != nil {
			q = *p
		}
		writeJSON(c.w, http.StatusOK, q)
	default:
		c.setQuota(t)
	}
}

// setQuota takes a quota from the body and keeps it.
func (c *call) setQuota(t *tenant) {
	body, err := c.readBody()
	if err != nil {
		c.fail(err)
		return
	}
	var q Quota
	if err := jsonerr.Decode(body, &q, jsonerr.KnownFields); err != nil {
		c.fail(fmt.Errorf("%w: quota: %w", ErrBadRequest, err))
		return
	}
	if err := q.Validate(); err != nil {
		c.fail(fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	if err := c.s.reg.storeQuota(t, q); err != nil {
		c.fail(err)
		c.s.auditf(c, "quota", t.name, err.Error())
		return
	}
	writeJSON(c.w, http.StatusOK, q)
	c.s.auditf(c, "quota", t.name, string(body))
	c.log.Info("admin change", "what", "quota", "tenant", t.name)
}
