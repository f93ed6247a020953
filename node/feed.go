package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/wire"
)

const (
	defaultFeedLimit = 1000
	maxFeedLimit     = 10000
)

// feedLine is one write of the change feed.
type feedLine struct {
	Seq  uint64    `json:"seq"`
	Puts []feedDoc `json:"puts"`
	Dels []feedDoc `json:"dels"`
}

type feedDoc struct {
	Coll string     `json:"coll"`
	ID   int64      `json:"id"`
	Doc  engine.Row `json:"doc,omitempty"`
}

// feed serves GET /t/<t>/_changes?since=S&limit=L&wait=MS: the writes
// after S as NDJSON, one line a block, Fenec-Next naming the seq to ask
// from next. With wait, an empty answer waits up to MS for a write.
func (c *call) feed() {
	q, err := c.queryValues()
	if err != nil {
		c.fail(err)
		return
	}
	since, limit, wait, err := feedParams(q.Get("since"), q.Get("limit"), q.Get("wait"))
	if err != nil {
		c.fail(err)
		return
	}
	chs, err := c.t.db.ChangesSince(since, limit)
	if err == nil && len(chs) == 0 && wait > 0 {
		c.s.metrics.held.Inc()
		werr := c.t.waitSeq(c.r.Context(), since+1, wait)
		c.s.metrics.held.Dec()
		switch {
		case werr == nil:
			chs, err = c.t.db.ChangesSince(since, limit)
		case !errors.Is(werr, ErrAfterTimeout) && !errors.Is(werr, ErrShuttingDown):
			err = werr
		}
	}
	if err != nil {
		if errors.Is(err, engine.ErrCursorGone) {
			c.failWith(err, map[string]any{"seq": c.t.db.Seq()})
			return
		}
		c.fail(err)
		return
	}
	next := since
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, ch := range chs {
		line := feedLine{Seq: ch.Seq, Puts: make([]feedDoc, 0, len(ch.Puts)), Dels: make([]feedDoc, 0, len(ch.Dels))}
		for _, d := range ch.Puts {
			line.Puts = append(line.Puts, feedDoc{Coll: d.Coll, ID: d.ID, Doc: d.Doc})
		}
		for _, d := range ch.Dels {
			line.Dels = append(line.Dels, feedDoc{Coll: d.Coll, ID: d.ID})
		}
		if err := enc.Encode(line); err != nil {
			c.fail(fmt.Errorf("encode change: %w", err))
			return
		}
		next = ch.Seq
	}
	// Bounded for next: every write up to it is in this answer or the
	// pages before it.
	if !c.settledRead(next) {
		return
	}
	h := c.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set(wire.HeaderNext, strconv.FormatUint(next, 10))
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	c.w.WriteHeader(http.StatusOK)
	c.w.Write(b.Bytes())
}

// feedParams reads since (default 0), limit (default 1000, at most
// 10000) and wait (ms, at most maxWait).
func feedParams(since, limit, wait string) (uint64, int, time.Duration, error) {
	var (
		s   uint64
		l   = defaultFeedLimit
		w   time.Duration
		err error
	)
	if since != "" {
		if s, err = strconv.ParseUint(since, 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("%w: since must be a seq", ErrBadRequest)
		}
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 {
			return 0, 0, 0, fmt.Errorf("%w: limit must be a positive number", ErrBadRequest)
		}
		l = min(n, maxFeedLimit)
	}
	if wait != "" {
		if w, err = parseWait(wait); err != nil {
			return 0, 0, 0, err
		}
	}
	return s, l, w, nil
}
