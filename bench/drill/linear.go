package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/internal/history"
	"github.com/fenec-go/fenec/wire"
)

// A tenant's writes are appends to one list, its collection w in id
// order (ids are counted per collection in the order the primary takes
// the inserts), and its writers read that list as they go: porcupine
// then checks each tenant's history (internal/history, as tests/nemesis
// does), by the elements each read shows, and the order they show them
// in is held to the appends' order in time. Two primaries taking writes
// at once show there as a read missing an append acknowledged before it
// was sent, or two reads that fork.

// listKey names the tenant's one list among its objects.
const listKey = "w"

// readEvery is how often a writer's reader reads its tenant's list: by
// time, not by writes, so that the reads go on while a write waits out a
// failover and their load stays the same at any pace of writes.
const readEvery = 500 * time.Millisecond

// epoch is the origin of every recorded time: one for the process, so
// that the operations of a tenant's writers compare.
var epoch = time.Now()

// since is t in ns since epoch.
func since(t time.Time) int64 { return int64(t.Sub(epoch)) }

// reader reads the tenant's list every readEvery, through the router
// the writer asks now, once each (a read is never sent again; a tick
// that finds the last read still under way is dropped), until ctx ends.
// It runs beside the writer so that a read held up by a fault never
// holds up a write.
func (w *writer) reader(ctx context.Context) {
	t := time.NewTicker(readEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		op := w.readList(ctx, w.bases[w.asking.Load()])
		w.mu.Lock()
		w.ops = append(w.ops, op)
		w.mu.Unlock()
	}
}

// readList reads the tenant's list once through base, with no staleness
// asked for: the tenant's primary answers.
func (w *writer) readList(ctx context.Context, base string) *history.Op {
	op := &history.Op{Tenant: w.tenant, Kind: history.ListRead, Key: listKey, Via: hostOf(base), Staleness: history.NoBound}
	at := time.Now()
	op.Call = since(at)
	status, hdr, body, err := w.query(ctx, base, "get w select k order id")
	a := history.Attempt{At: op.Call, Took: int64(time.Since(at)), Status: status}
	op.Return = a.At + a.Took
	if err != nil {
		a.Err = history.ErrText(err)
	}
	op.Outcome, _ = history.Classify(a, true)
	if op.Outcome != history.OK {
		return op
	}
	op.Node = hdr.Get("Fenec-Node")
	switch v := hdr.Get(wire.HeaderStaleness); {
	case v == wire.StalenessUnbounded:
		op.Staleness = history.Unbounded
	case v != "":
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			op.Staleness = ms
		}
	}
	var rows []struct {
		K int64 `json:"k"`
	}
	if err := json.Unmarshal(body, &rows); err != nil {
		op.Outcome = history.Unknown // an answer that is not the list: no read to hold it to
		return op
	}
	op.List = make([]int64, 0, len(rows))
	for _, r := range rows {
		op.List = append(op.List, r.K)
	}
	return op
}

// query sends one read through base.
func (w *writer) query(ctx context.Context, base, q string) (int, http.Header, []byte, error) {
	b, _ := json.Marshal(map[string]any{"query": q})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/t/"+w.tenant+"/query", bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	res, err := w.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, nil, err // cut short: what it held is not known
	}
	return res.StatusCode, res.Header, body, nil
}

// history is the writer's operations so far.
func (w *writer) history() []*history.Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ops)
}

// linResult is what porcupine made of a run's tenants' histories.
type linResult struct {
	tenants  int               // with writers
	ok       []string          // linearizable
	timedOut []string          // porcupine ran out of time: neither passed nor failed
	bad      map[string]string // not linearizable: tenant → its visualization's file
	why      []string          // where each bad one stopped
	ops      int               // operations given to porcupine
	reads    int               // list reads answered
	took     time.Duration
}

// checkHistories checks each tenant's history, both writers' of it,
// with porcupine within timeout a tenant, and writes the visualization
// of any not linearizable to dir, named after label and the tenant.
func checkHistories(writers []*writer, timeout time.Duration, dir, label string) *linResult {
	start := time.Now()
	lr := &linResult{bad: map[string]string{}}
	tenants := map[string]bool{}
	var ops []*history.Op
	for i, w := range writers {
		tenants[w.tenant] = true
		for _, op := range w.history() {
			// A writer's writes and its reader's reads are two clients.
			op.Client = 2 * i
			if op.Kind == history.ListRead {
				op.Client++
				if op.Outcome == history.OK {
					lr.reads++
				}
			}
			ops = append(ops, op)
		}
	}
	lr.tenants = len(tenants)
	slices.SortStableFunc(ops, func(a, b *history.Op) int { return cmp.Compare(a.Call, b.Call) })
	for i, op := range ops {
		op.ID = i
	}
	// Porcupine judges which elements each read shows (two writers
	// append at once: the order's model cannot be searched in time),
	// CheckLists and CheckListOrder the order they show them in.
	anomalies := append(history.CheckLists(ops, nil), history.CheckListOrder(ops)...)
	for _, r := range history.CheckObjects(ops, history.Options{Timeout: timeout, ListsBySet: true}) {
		lr.ops += r.Ops
		var why []string
		if r.Anomaly != nil {
			why = append(why, r.Anomaly.String())
		}
		for _, a := range anomalies {
			if a.Tenant == r.Tenant {
				why = append(why, a.String())
			}
		}
		switch {
		case len(why) > 0:
			file := filepath.Join(dir, fmt.Sprintf("drill-%s-%s.porcupine.html", label, r.Tenant))
			if err := writeVisualization(r, file); err != nil {
				file = "(not written: " + err.Error() + ")"
			} else if err := writeOps(ops, r.Tenant, strings.TrimSuffix(file, ".porcupine.html")+".history.json"); err != nil {
				file += " (its history not written: " + err.Error() + ")"
			} else {
				file += " and .history.json"
			}
			lr.bad[r.Tenant] = file
			lr.why = append(lr.why, why...)
		case r.Verdict == history.Linearizable:
			lr.ok = append(lr.ok, r.Tenant)
		default:
			lr.timedOut = append(lr.timedOut, r.Tenant)
		}
	}
	lr.took = time.Since(start)
	return lr
}

func writeVisualization(r history.Result, file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := r.Visualize(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeOps writes tenant's operations, each with its attempts, as JSON.
func writeOps(ops []*history.Op, tenant, file string) error {
	var mine []*history.Op
	for _, op := range ops {
		if op.Tenant == tenant {
			mine = append(mine, op)
		}
	}
	b, err := json.MarshalIndent(mine, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// text is the check in a cell: linearizable of how many, and those
// porcupine could not judge in time or found not linearizable.
func (lr *linResult) text() string {
	if lr == nil {
		return "-"
	}
	s := fmt.Sprintf("%d/%d", len(lr.ok), lr.tenants)
	if n := len(lr.timedOut); n > 0 {
		s += fmt.Sprintf(" (%d timed out)", n)
	}
	if n := len(lr.bad); n > 0 {
		s += fmt.Sprintf(" (%d NOT)", n)
	}
	return s
}

// verdict is one tenant's, for a row naming it.
func (lr *linResult) verdict(tenant string) string {
	switch {
	case lr == nil:
		return "-"
	case slices.Contains(lr.ok, tenant):
		return "yes"
	case slices.Contains(lr.timedOut, tenant):
		return "timed out"
	case lr.bad[tenant] != "":
		return "NO"
	}
	return "unchecked"
}

// problems are what fails the drill, -check or not, as a lost write does.
func (lr *linResult) problems(kase string, run int) []string {
	if lr == nil {
		return nil
	}
	var out []string
	tenants := make([]string, 0, len(lr.bad))
	for t := range lr.bad {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	for _, t := range tenants {
		out = append(out, fmt.Sprintf("%s #%d: tenant %s's history is not linearizable (porcupine: %s)", kase, run, t, lr.bad[t]))
	}
	return out
}

// whyLines are where each history not linearizable stopped, and the
// file of its visualization.
func (lr *linResult) whyLines() []string {
	if lr == nil {
		return nil
	}
	var out []string
	for _, w := range lr.why {
		out = append(out, strings.Split(w, "\n")...)
	}
	return out
}

// summary is the check in a sentence.
func (lr *linResult) summary() string {
	if lr == nil {
		return "no history checked"
	}
	s := fmt.Sprintf("linearizable (porcupine, an append-only list a tenant): %s tenants, %d operations (%d list reads) in %.1f s",
		lr.text(), lr.ops, lr.reads, lr.took.Seconds())
	if len(lr.timedOut) > 0 {
		s += "; timed out, unknown: " + strings.Join(lr.timedOut, ", ")
	}
	for _, p := range lr.problems("", 0) {
		s += ";" + strings.TrimPrefix(p, " #0:")
	}
	return s
}
