package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fenec-go/fenec/engine"
	"github.com/fenec-go/fenec/internal/jsonerr"
)

// catchUpBlocks is how many blocks one ChangesSince read takes.
const catchUpBlocks = 1000

// subscriber is one open subscription: the tenant's watcher offers it
// every landed Change without blocking; when its buffer is full it is
// marked lost and catches up from the file.
type subscriber struct {
	ch     chan engine.Change
	lost   atomic.Bool
	signal chan struct{} // cap 1: lost was set
}

func newSubscriber() *subscriber {
	return &subscriber{ch: make(chan engine.Change, 256), signal: make(chan struct{}, 1)}
}

// offer runs under the engine's write lock: it never blocks.
func (s *subscriber) offer(c engine.Change) {
	select {
	case s.ch <- c:
	default:
		s.lost.Store(true)
		select {
		case s.signal <- struct{}{}:
		default:
		}
	}
}

// addSub registers a subscription unless the tenant has max already.
func (t *tenant) addSub(s *subscriber, max int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.subs) >= max {
		return ErrTooManyStreams
	}
	t.subs[s] = struct{}{}
	return nil
}

func (t *tenant) dropSub(s *subscriber) {
	t.mu.Lock()
	delete(t.subs, s)
	t.mu.Unlock()
}

// sse writes one subscription's events.
type sse struct {
	c      *call
	rc     *http.ResponseController
	coll   string
	where  string
	params []any
	filter engine.Filter // nil: every document of coll
	last   uint64        // seq of the last event sent (or seeded)
	// known holds the ids the client has matching, once seeded; nil after
	// a resume, when a put that does not match is sent as a delete in
	// case the client had it.
	known map[int64]bool
}

// subscribe serves GET /t/<t>/<coll>/changes?since=S&<filter>: a seed
// (unless since resumes), then a change event per landed block touching
// the collection, keepalive comments, and an error event when the tenant
// goes away or the node shuts down.
func (c *call) subscribe(coll string) {
	q, err := c.queryValues()
	if err != nil {
		c.fail(err)
		return
	}
	for _, k := range []string{"select", "order", "limit", "offset", "count"} {
		if _, ok := q[k]; ok {
			c.fail(fmt.Errorf("%w: a subscription sends whole rows, each as it changes: %s= is GET /t/<t>/%s's, never a subscription's (filter one with FIELD=OP.VALUE, resume one with since=SEQ)",
				ErrBadRequest, k, coll))
			return
		}
	}
	var b stmtBuilder
	where, err := b.where(q)
	if err != nil {
		c.fail(err)
		return
	}
	since, resume, err := sinceParam(c.r, q)
	if err != nil {
		c.fail(err)
		return
	}
	st := &sse{c: c, rc: http.NewResponseController(c.w), coll: coll, where: where, params: b.params}
	if where != "" {
		if st.filter, err = c.t.db.CompileFilter(coll, where, b.params); err != nil {
			c.fail(err)
			return
		}
	} else if err := c.t.checkColl(c, coll); err != nil {
		c.fail(err)
		return
	}
	sub := newSubscriber()
	if err := c.t.addSub(sub, c.t.maxStreams(c.s.cfg.MaxStreams)); err != nil {
		c.fail(err)
		return
	}
	defer c.t.dropSub(sub)
	defer c.cutWhenGone()()
	c.s.metrics.streams.Inc()
	defer c.s.metrics.streams.Dec()

	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	if err := st.start(since, resume); err != nil {
		st.sendError(err)
		return
	}
	st.loop(sub)
}

// checkColl answers ErrUnknownCollection for a collection that is not
// there (a filterless subscription compiles no filter to find out).
func (t *tenant) checkColl(c *call, coll string) error {
	_, _, err := t.db.Exec(c.r.Context(), engine.Statement{Query: "get " + coll + " limit 0"})
	return err
}

// sinceParam reads since= (or Last-Event-ID): resume is false if absent.
func sinceParam(r *http.Request, q url.Values) (uint64, bool, error) {
	v := q.Get("since")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: since must be a seq", ErrBadRequest)
	}
	return n, true, nil
}

// start resumes from since if the file still keeps it, else seeds.
func (st *sse) start(since uint64, resume bool) error {
	if resume {
		st.last = since
		err := st.catchUp()
		if !errors.Is(err, engine.ErrCursorGone) {
			return err
		}
	}
	return st.seed()
}

// seed sends every matching row with the seq it was read at.
func (st *sse) seed() error {
	text := "get " + st.coll
	if st.where != "" {
		text += " where " + st.where
	}
	// The seed is read as a lone read is, and written as it is encoded:
	// what it holds of the node's answer budget is given back once it is
	// sent (the stream goes on holding none).
	hold := st.c.held()
	defer hold.release()
	res, seq, err := st.c.readRows(engine.Statement{Query: text, Params: st.params})
	if err != nil {
		return err
	}
	st.last = seq
	if st.filter != nil {
		st.known = make(map[int64]bool, res.Len())
		res.EachRowID(func(id int64) { st.known[id] = true })
	}
	return st.sendRows("seed", seq, res)
}

// sendRows writes one event whose data is {"seq": seq, "rows": [...]},
// the rows written as they are encoded, and flushes it.
func (st *sse) sendRows(event string, seq uint64, res *engine.Result) error {
	st.c.settledFor(seq) // no event shows a write a crash or failover may lose
	enc := res.Encoder()
	if err := st.c.held().take(int64(enc.RowBound())); err != nil {
		return err
	}
	head := "event: " + event
	if seq > 0 {
		head += "\nid: " + strconv.FormatUint(seq, 10)
	}
	head += "\ndata: {\"seq\":" + strconv.FormatUint(seq, 10) + ",\"rows\":"
	if _, err := io.WriteString(st.c.w, head); err != nil {
		return err
	}
	b, done := enc.Next(pieceBuffer(enc), answerPiece)
	if err := st.c.writePieces(enc, b, done, []byte("}\n\n")); err != nil {
		return err
	}
	return st.rc.Flush()
}

// catchUp sends the changes after st.last read from the file.
func (st *sse) catchUp() error {
	for {
		chs, err := st.c.t.db.ChangesSince(st.last, catchUpBlocks)
		if err != nil {
			return err
		}
		for _, ch := range chs {
			if err := st.change(ch); err != nil {
				return err
			}
		}
		if len(chs) < catchUpBlocks {
			return nil
		}
	}
}

// loop sends changes as they land until the stream ends.
func (st *sse) loop(sub *subscriber) {
	c := st.c
	keep := time.NewTicker(c.s.cfg.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case ch := <-sub.ch:
			if err := st.change(ch); err != nil {
				return
			}
		case <-sub.signal:
			if err := st.recover(sub); err != nil {
				st.sendError(err)
				return
			}
		case <-keep.C:
			if st.comment("keepalive") != nil {
				return
			}
		case <-c.t.ctx.Done():
			st.sendError(context.Cause(c.t.ctx))
			return
		case <-c.s.stopping:
			st.sendError(ErrShuttingDown)
			return
		case <-c.r.Context().Done():
			return
		}
	}
}

// recover catches a lost subscriber up from the file (reseeding if the
// file no longer keeps its cursor).
func (st *sse) recover(sub *subscriber) error {
	if !sub.lost.Swap(false) {
		return nil
	}
	for len(sub.ch) > 0 {
		<-sub.ch
	}
	err := st.catchUp()
	if errors.Is(err, engine.ErrCursorGone) {
		return st.seed()
	}
	return err
}

// change sends a change event for ch's documents of the collection:
// puts that match the filter, and deletes (a put that no longer matches
// is sent as a delete).
func (st *sse) change(ch engine.Change) error {
	if ch.Seq <= st.last {
		return nil
	}
	st.last = ch.Seq
	puts, dels := []engine.Row{}, []int64{}
	for _, d := range ch.Puts {
		if d.Coll != st.coll {
			continue
		}
		switch {
		case st.filter == nil || st.filter.Match(d.Doc):
			puts = append(puts, withID(d))
			st.remember(d.ID, true)
		case st.known == nil || st.known[d.ID]:
			dels = append(dels, d.ID)
			st.remember(d.ID, false)
		}
	}
	for _, d := range ch.Dels {
		if d.Coll == st.coll && (st.known == nil || st.known[d.ID] || st.filter == nil) {
			dels = append(dels, d.ID)
			st.remember(d.ID, false)
		}
	}
	if len(puts) == 0 && len(dels) == 0 {
		return nil
	}
	b, err := json.Marshal(map[string]any{"seq": ch.Seq, "puts": puts, "dels": dels})
	if err != nil {
		return fmt.Errorf("encode change: %w", err)
	}
	return st.send("change", ch.Seq, b)
}

// remember notes whether the client has id matching (only once seeded
// with a filter).
func (st *sse) remember(id int64, has bool) {
	if st.known == nil {
		return
	}
	if has {
		st.known[id] = true
	} else {
		delete(st.known, id)
	}
}

// withID is a put's document with its id field.
func withID(d engine.DocChange) engine.Row {
	if _, ok := d.Doc["id"]; ok {
		return d.Doc
	}
	row := make(engine.Row, len(d.Doc)+1)
	for k, v := range d.Doc {
		row[k] = v
	}
	row["id"] = d.ID
	return row
}

// send writes one event and flushes it.
func (st *sse) send(event string, seq uint64, data []byte) error {
	st.c.settledFor(seq) // no event shows a write a crash or failover may lose
	var b bytes.Buffer
	b.WriteString("event: ")
	b.WriteString(event)
	if seq > 0 {
		b.WriteString("\nid: ")
		b.WriteString(strconv.FormatUint(seq, 10))
	}
	b.WriteString("\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := st.c.w.Write(b.Bytes()); err != nil {
		return err
	}
	return st.rc.Flush()
}

func (st *sse) comment(text string) error {
	if _, err := st.c.w.Write([]byte(": " + text + "\n\n")); err != nil {
		return err
	}
	return st.rc.Flush()
}

// sendError ends the stream with an error event.
func (st *sse) sendError(err error) {
	b, _ := jsonerr.Marshal(map[string]any{"error": st.c.s.pathless(err).Error()})
	st.send("error", 0, b)
}
