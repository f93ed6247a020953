package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/internal/history"
	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/wire"
)

// Mix weighs the operations a client picks.
type Mix struct {
	RegWrite, RegRead, Append, ListRead, Incr, CntRead int
	// CopyRead is a direct client's read of a list from the tenant's
	// copy: with Fenec-After and Fenec-History of its own last append
	// there, or with Fenec-Max-Staleness.
	CopyRead int
}

// DefaultMix is the workload of most scenarios.
var DefaultMix = Mix{RegWrite: 20, RegRead: 20, Append: 25, ListRead: 15, Incr: 10, CntRead: 10, CopyRead: 15}

// copyRead is the pick of a direct client's read from a copy.
const copyRead Kind = "copy.read"

// copyStaleness is the Fenec-Max-Staleness a copy read asks for, in ms.
const copyStaleness = 500

// pick draws an operation by the weights.
func (m Mix) pick(rng *rand.Rand, direct bool) Kind {
	type w struct {
		k Kind
		n int
	}
	all := []w{{RegWrite, m.RegWrite}, {ListAppend, m.Append}, {Incr, m.Incr}}
	if direct { // straight to the nodes, clients write, and read only from copies, saying how fresh
		all = append(all, w{copyRead, m.CopyRead})
	} else {
		all = append(all, w{RegRead, m.RegRead}, w{ListRead, m.ListRead}, w{CntRead, m.CntRead})
	}
	total := 0
	for _, x := range all {
		total += x.n
	}
	r := rng.IntN(max(total, 1))
	for _, x := range all {
		if r < x.n {
			return x.k
		}
		r -= x.n
	}
	return RegWrite
}

// listKeys are each tenant's lists.
var listKeys = []string{"a", "b", "c"}

const (
	// attemptWait bounds one request: past the routers' upstream
	// timeout (5 s), so a router's own answer comes first.
	attemptWait = 7 * time.Second
	// settleWait bounds a keyed write's attempts: past it, an operation
	// still unsettled is unknown.
	settleWait = 20 * time.Second
)

// Workload is the clients of a run: through the routers, and straight
// to the node each tenant's primary is on (by the directory, as last
// read), at a steady rate each.
type Workload struct {
	topo  *Topo
	h     *History
	mix   Mix
	every time.Duration

	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	placement map[string]Placement // guarded by mu
}

// client is one worker: its connections, its own random numbers.
type client struct {
	id     int
	via    string
	cl     *cluster.Client // nil for a direct client, which picks a node per operation
	direct map[string]*cluster.Client
	rng    *rand.Rand
	n      int64 // operations begun, for unique values and keys
	// appended is the client's last acknowledged append to each list
	// (and, a far client's, write of the register), by object, for its
	// reads from copies to ask for.
	appended map[string]*Op
}

// StartWorkload starts routers×perRouter clients through the routers
// and direct clients straight to the nodes, each beginning an operation
// every every.
func StartWorkload(topo *Topo, h *History, seed uint64, mix Mix, perRouter, direct int, every time.Duration) *Workload {
	w := &Workload{topo: topo, h: h, mix: mix, every: every, stop: make(chan struct{}), placement: map[string]Placement{}}
	w.refresh()
	directs := map[string]*cluster.Client{}
	for _, n := range topo.Nodes {
		directs[n.Name] = cluster.NewClient(topo.tb, n.DirectURL(), "")
	}
	id := 0
	for _, r := range topo.Routers {
		for range perRouter {
			id++
			c := &client{id: id, via: "router:" + r.Name, cl: cluster.NewClient(topo.tb, r.URL(), ""), rng: rand.New(rand.NewPCG(seed, uint64(id)))}
			w.wg.Go(func() { w.run(c) })
		}
	}
	for range direct {
		id++
		c := &client{id: id, via: "node", direct: directs, rng: rand.New(rand.NewPCG(seed, uint64(id)))}
		w.wg.Go(func() { w.run(c) })
	}
	if near := topo.NearRouter(); near != nil {
		for range farClients {
			id++
			c := &client{id: id, via: "router:" + near.Name, cl: cluster.NewClient(topo.tb, near.URL(), ""), rng: rand.New(rand.NewPCG(seed, uint64(id)))}
			w.wg.Go(func() { w.runFar(c) })
		}
	}
	w.wg.Go(w.poll)
	return w
}

// Stop stops beginning operations and waits for those under way to
// settle.
func (w *Workload) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// poll keeps the direct clients' placements fresh.
func (w *Workload) poll() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.refresh()
		}
	}
}

func (w *Workload) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ps, err := w.topo.Placements(ctx)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.placement = ps
	w.mu.Unlock()
}

// primaryOf is the node the directory last placed tenant on.
func (w *Workload) primaryOf(tenant string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.placement[tenant].Node
}

func (w *Workload) run(c *client) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	tenants := w.topo.Tenants()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		tenant := tenants[c.rng.IntN(len(tenants))]
		if k := w.mix.pick(c.rng, c.cl == nil); k == copyRead {
			w.copyRead(c, tenant)
		} else {
			w.one(c, tenant, k, false)
		}
	}
}

// one runs one operation of kind on tenant and records it.
func (w *Workload) one(c *client, tenant string, kind Kind, final bool) *Op {
	op, body := w.newOp(c, tenant, kind, final)
	return w.do(c, op, body)
}

// newOp is an operation of kind on tenant, and the body of its request.
func (w *Workload) newOp(c *client, tenant string, kind Kind, final bool) (*Op, map[string]any) {
	c.n++
	op := &Op{Client: c.id, Via: c.via, Tenant: tenant, Kind: kind, Final: final, Staleness: NoBound}
	var q string
	var params []any
	switch kind {
	case RegWrite:
		op.Value = int64(c.id)*1_000_000 + c.n
		q, params = "set reg {v: $1} where k = 'r' require 1", []any{op.Value}
	case RegRead:
		q = "get reg select v where k = 'r'"
	case ListAppend:
		op.Key = listKeys[c.rng.IntN(len(listKeys))]
		op.Value = int64(c.id)*1_000_000 + c.n
		q, params = "insert log {l: $1, e: $2}", []any{op.Key, op.Value}
	case ListRead:
		op.Key = listKeys[c.rng.IntN(len(listKeys))]
		q, params = "get log select e where l = $1 order id", []any{op.Key}
	case Incr:
		q = "set cnt {v: v + 1} where k = 'c' require 1 returning v"
	case CntRead:
		q = "get cnt select v where k = 'c'"
	}
	if kind == ListAppend || kind == Incr {
		op.IdemKey = fmt.Sprintf("c%d-%d", c.id, c.n)
	}
	body := map[string]any{"query": q}
	if params != nil {
		body["params"] = params
	}
	return op, body
}

// do sends op until it settles and records it.
func (w *Workload) do(c *client, op *Op, body map[string]any) *Op {
	op.Call = w.h.Now()
	w.attempts(c, op, body)
	w.h.Add(op)
	if (op.Kind == ListAppend || op.Kind == RegWrite) && op.Outcome == OK && op.History != "" && op.Seq > 0 {
		if c.appended == nil {
			c.appended = map[string]*Op{}
		}
		c.appended[history.Object(op)] = op
	}
	return op
}

// copyRead reads a list of tenant from its copy, straight: with
// Fenec-After and Fenec-History of the client's last append to it, which
// the answer must hold, or else with Fenec-Max-Staleness, which it must
// keep. A copy that cannot answer so declines (421) or times out (504):
// a read with no effect.
func (w *Workload) copyRead(c *client, tenant string) {
	w.mu.Lock()
	p := w.placement[tenant]
	w.mu.Unlock()
	cl := c.direct[p.Replica]
	if cl == nil {
		return
	}
	c.n++
	key := listKeys[c.rng.IntN(len(listKeys))]
	op := &Op{Client: c.id, Via: "node:" + p.Replica, Tenant: tenant, Kind: ListRead, Key: key, ToCopy: true, Staleness: NoBound}
	hdr := []string{wire.HeaderMaxStaleness, strconv.Itoa(copyStaleness)}
	if last := c.appended[history.Object(op)]; last != nil {
		op.After = last.ID
		hdr = []string{wire.HeaderAfter, strconv.FormatUint(last.Seq, 10), wire.HeaderHistory, last.History}
	}
	body := map[string]any{"query": "get log select e where l = $1 order id", "params": []any{key}}
	ctx, cancel := context.WithTimeout(context.Background(), attemptWait)
	defer cancel()
	op.Call = w.h.Now()
	a := Attempt{At: op.Call}
	res := cl.DoCtx(ctx, "POST", "/t/"+tenant+"/query", body, hdr...)
	a.Took, a.Status = w.h.Now()-a.At, res.Status
	op.Return, op.Outcome = a.At+a.Took, Fail
	if res.Err != nil {
		a.Err = res.Err.Error()
	} else {
		a.Node = w.topo.NodeName(res.Header.Get(wire.HeaderNode))
		if res.Status != 200 {
			a.Body = string(res.Body[:min(len(res.Body), 300)])
		}
	}
	op.Attempts = []Attempt{a}
	if res.Err == nil && res.Status == 200 {
		op.Outcome = OK
		w.settle(op, a, res)
	}
	w.h.Add(op)
}

// attempts sends op until it settles: once for a read or an unkeyed
// write, again and again with its key for a keyed one while it is
// refused or its outcome unknown, up to settleWait.
func (w *Workload) attempts(c *client, op *Op, body map[string]any) {
	deadline := time.Now().Add(settleWait)
	mayHaveRun := false
	for {
		a, res := w.attempt(c, op, body)
		op.Attempts = append(op.Attempts, a)
		class, again := classify(a, res)
		if class == Unknown {
			mayHaveRun = true
		}
		if class == OK {
			op.Outcome, op.Return = OK, a.At+a.Took
			w.settle(op, a, res)
			return
		}
		if op.IdemKey == "" || !again || time.Now().After(deadline) {
			op.Outcome, op.Return = history.Settle(op.Kind, class, mayHaveRun), a.At+a.Took
			return
		}
		time.Sleep(time.Duration(20+c.rng.IntN(60)) * time.Millisecond)
	}
}

// attempt is one request of op: through c's router, or straight to the
// node its tenant's primary is on.
func (w *Workload) attempt(c *client, op *Op, body map[string]any) (Attempt, *cluster.Resp) {
	cl := c.cl
	if cl == nil {
		node := w.primaryOf(op.Tenant)
		cl = c.direct[node]
		if cl == nil {
			return Attempt{At: w.h.Now(), Err: "no placement known"}, nil
		}
		op.Via = "node:" + node
	}
	hdr := op.Ask
	if op.IdemKey != "" {
		hdr = append(slices.Clone(hdr), "Idempotency-Key", op.IdemKey)
	}
	ctx, cancel := context.WithTimeout(context.Background(), attemptWait)
	defer cancel()
	a := Attempt{At: w.h.Now()}
	res := cl.DoCtx(ctx, "POST", "/t/"+op.Tenant+"/query", body, hdr...)
	a.Took = w.h.Now() - a.At
	a.Status = res.Status
	if res.Err != nil {
		a.Err = history.ErrText(res.Err)
		return a, res
	}
	a.Node = w.topo.NodeName(res.Header.Get(wire.HeaderNode))
	a.History = res.Header.Get(wire.HeaderHistory)
	a.Seq = res.Header.Get(wire.HeaderSeq)
	if res.Status/100 != 2 {
		a.Body = string(res.Body[:min(len(res.Body), 300)])
	}
	return a, res
}

// classify says what an attempt's answer tells of its operation, and
// whether sending it again (with its key) may settle it: as
// internal/history judges every suite's answers.
func classify(a Attempt, res *cluster.Resp) (Outcome, bool) {
	return history.Classify(a, res != nil)
}

// settle takes the answer of op's settling attempt into op.
func (w *Workload) settle(op *Op, a Attempt, res *cluster.Resp) {
	op.Node, op.History = a.Node, a.History
	op.Seq, _ = strconv.ParseUint(a.Seq, 10, 64)
	op.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
	op.ServedBy = res.Header.Get(wire.HeaderServedBy)
	// Every read a node answers states how old it may be: checkStaleness
	// holds it to that, and only one stated fresh (0) is held to
	// linearizability.
	switch v := res.Header.Get(wire.HeaderStaleness); {
	case v == wire.StalenessUnbounded:
		op.Staleness = Unbounded
	case v != "":
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			op.Staleness = ms
		}
	}
	if !op.Kind.Write() {
		op.History, op.Seq = "", 0
	}
	var rows []map[string]json.Number
	switch op.Kind {
	case RegRead, CntRead, Incr:
		dec := json.NewDecoder(strings.NewReader(string(res.Body)))
		dec.UseNumber()
		if dec.Decode(&rows) != nil || len(rows) > 1 {
			w.h.Note("%s: an answer that is not one row: %s", op, res.Body)
			op.Outcome = Unknown
			return
		}
		op.Value = history.Missing
		if len(rows) == 1 {
			op.Value, _ = rows[0]["v"].Int64()
		}
	case ListRead:
		if err := json.Unmarshal(res.Body, &rows); err != nil {
			w.h.Note("%s: a list read that is not rows: %s", op, res.Body)
			op.Outcome = Unknown
			return
		}
		op.List = make([]int64, 0, len(rows))
		for _, r := range rows {
			e, _ := r["e"].Int64()
			op.List = append(op.List, e)
		}
	}
}

// FinalReads reads every object of every tenant back through the
// leading router, each read sent again until answered (within wait),
// and records them as the history's final reads.
func (w *Workload) FinalReads(wait time.Duration) {
	c := &client{id: 0, via: "router:final", cl: w.topo.Leader().cl, rng: rand.New(rand.NewPCG(0, 0))}
	for _, tenant := range w.topo.Tenants() {
		for _, k := range []Kind{RegRead, CntRead} {
			w.finalRead(c, tenant, k, "", wait)
		}
		for _, key := range listKeys {
			w.finalRead(c, tenant, ListRead, key, wait)
		}
	}
}

func (w *Workload) finalRead(c *client, tenant string, kind Kind, key string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		op := &Op{Client: 0, Via: c.via, Tenant: tenant, Kind: kind, Key: key, Final: true, Call: w.h.Now(), Staleness: NoBound}
		q, params := "get reg select v where k = 'r'", []any(nil)
		switch kind {
		case CntRead:
			q = "get cnt select v where k = 'c'"
		case ListRead:
			q, params = "get log select e where l = $1 order id", []any{key}
		}
		body := map[string]any{"query": q}
		if params != nil {
			body["params"] = params
		}
		a, res := w.attempt(c, op, body)
		op.Attempts = []Attempt{a}
		if class, _ := classify(a, res); class == OK {
			op.Outcome, op.Return = OK, a.At+a.Took
			w.settle(op, a, res)
			if op.Outcome == OK {
				w.h.Add(op)
				return
			}
		}
		if time.Now().After(deadline) {
			w.h.Note("final read of %s %s%s never answered: last %d %s %s", tenant, kind, key, a.Status, a.Err, a.Body)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
