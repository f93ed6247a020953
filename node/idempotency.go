package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fenec-go/fenec/engine"
)

// idemColl is the collection the node keeps Idempotency-Keys in.
const idemColl = "_idempotency"

// keyed is a request carrying an Idempotency-Key.
type keyed struct {
	key  string
	hash string // of method, target and body
}

// storedAnswer is the answer kept with a key.
type storedAnswer struct {
	Hash   string
	Status int
	Body   []byte
	Seq    uint64
}

// idempotencyKey reads the Idempotency-Key header: "" if absent, and
// false (answered 400) if it is not 1..255 bytes.
func (c *call) idempotencyKey() (string, bool) {
	vals := c.r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", true
	}
	if len(vals) > 1 || len(vals[0]) < 1 || len(vals[0]) > 255 {
		c.fail(fmt.Errorf("%w: Idempotency-Key must be one value of 1 to 255 bytes", ErrBadRequest))
		return "", false
	}
	return vals[0], true
}

// requestHash identifies a request: method, raw target and body.
func requestHash(r *http.Request, body []byte) string {
	h := sha256.New()
	h.Write([]byte(r.Method))
	h.Write([]byte{0})
	h.Write([]byte(r.URL.EscapedPath()))
	h.Write([]byte{'?'})
	h.Write([]byte(r.URL.RawQuery))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// lockKey makes the caller the only request running with key on t; a
// second one waits for the first to finish. The returned func lets it go.
func (t *tenant) lockKey(ctx context.Context, key string) (func(), error) {
	for {
		t.mu.Lock()
		ch, busy := t.keys[key]
		if !busy {
			ch = make(chan struct{})
			t.keys[key] = ch
			t.mu.Unlock()
			return func() {
				t.mu.Lock()
				delete(t.keys, key)
				t.mu.Unlock()
				close(ch)
			}, nil
		}
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.ctx.Done():
			return nil, context.Cause(t.ctx)
		}
	}
}

// replay answers a request whose key is already stored: the first answer
// with Idempotent-Replayed, or 422 when the key came with another
// request. It returns false when the key is new (and the collection
// keeping keys exists).
func (c *call) replay(k *keyed) bool {
	got, err := c.t.lookupKey(c.r.Context(), k.key)
	if err != nil {
		c.fail(err)
		return true
	}
	if got == nil {
		if err := c.t.ensureKeys(c.r.Context(), c.s.cfg.IdempotencyTTL.Seconds()); err != nil {
			c.fail(err)
			return true
		}
		return false
	}
	if got.Hash != k.hash {
		c.fail(ErrKeyReused)
		return true
	}
	if got.Seq > 0 && got.Status < 300 && !c.settleWrite(got.Seq) {
		// The first answer may never have gone out: its client hung up,
		// or it was 500 (outcome unknown) because the lease lapsed while
		// the write waited for a copy. Its key is kept with the write all
		// the same, so the stored answer is given only as the write's own
		// would be: once the copies a write waits for hold it (or the
		// router recorded the one counted on behind), under the lease.
		// Replayed at once, it acknowledged a write that a failover to
		// the copy then lost.
		return true
	}
	h := c.w.Header()
	h.Set("Idempotent-Replayed", "true")
	if got.Seq > 0 {
		c.setWritten(got.Seq)
	}
	writeRaw(c.w, got.Status, got.Body)
	return true
}

// lookupKey reads a stored key; nil if there is none (or no collection).
func (t *tenant) lookupKey(ctx context.Context, key string) (*storedAnswer, error) {
	res, _, err := t.db.Exec(ctx, engine.Statement{
		Query:  "get " + idemColl + " where key = $1 limit 1",
		Params: []any{key},
	})
	if errors.Is(err, engine.ErrUnknownCollection) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up idempotency key: %w", err)
	}
	if len(res.Rows) == 0 {
		return nil, nil
	}
	row := res.Rows[0]
	hash, _ := row["hash"].(string)
	body, _ := row["body"].(string)
	return &storedAnswer{
		Hash:   hash,
		Status: int(asInt(row["status"])),
		Body:   []byte(body),
		Seq:    uint64(asInt(row["seq"])),
	}, nil
}

// ensureKeys creates the keys' collection once per open tenant.
func (t *tenant) ensureKeys(ctx context.Context, ttlSeconds float64) error {
	t.mu.Lock()
	ok := t.idemOK
	t.mu.Unlock()
	if ok {
		return nil
	}
	_, err := t.batch(ctx, []engine.Statement{{Query: fmt.Sprintf(
		"create collection if not exists %s (key text required @unique, hash text, status int, body text, seq int, at timestamp required @ttl(%ds))",
		idemColl, int64(ttlSeconds))}}, engine.BatchOptions{})
	if err != nil {
		return fmt.Errorf("create idempotency keys: %w", err)
	}
	t.mu.Lock()
	t.idemOK = true
	t.mu.Unlock()
	return nil
}

// keyStatement is the put storing k's answer, and the answer it stores.
// It runs inside BatchOptions.Extra, under the engine's write lock, where
// the mirrored seq is the seq before the block: the block's seq is that
// plus what its statements write plus the key's own put.
func (t *tenant) keyStatement(k *keyed, status int, body []byte, rs []*engine.Result) (*storedAnswer, engine.Statement) {
	t.mu.Lock()
	seq := t.seq + blockWrites(rs) + 1
	t.mu.Unlock()
	a := &storedAnswer{Hash: k.hash, Status: status, Body: body, Seq: seq}
	return a, engine.Statement{
		Query:  "put " + idemColl + " {key: $1, hash: $2, status: $3, body: $4, seq: $5, at: now()}",
		Params: []any{k.key, k.hash, json.Number(strconv.Itoa(status)), string(body), json.Number(strconv.FormatUint(seq, 10))},
	}
}

// fixKeySeq corrects a stored key's seq when the block's differed from
// the one counted before it landed (a statement that wrote less than its
// kind says, such as a create that found its collection). The caller
// still holds the key, so no replay reads it in between.
func (t *tenant) fixKeySeq(ctx context.Context, key string, counted, seq uint64) {
	_, err := t.batch(ctx, []engine.Statement{{
		Query:  "set " + idemColl + " {seq: $1} where key = $2",
		Params: []any{json.Number(strconv.FormatUint(seq, 10)), key},
	}}, engine.BatchOptions{})
	if err != nil {
		t.reg.log.Warn("idempotency key kept with a seq off the block's", "tenant", t.name,
			"counted", counted, "seq", seq, "err", err)
	}
}

// asInt reads a JSON-ready number.
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return 0
}
