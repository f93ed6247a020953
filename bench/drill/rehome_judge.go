package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// What the rehome case checks after its moves: the node a tenant did not
// end on refusing a write sent straight to it, the step each move was seen
// at, and every acknowledged write found where the tenant ended.

// probeOther sends a write straight to each node of m that the tenant
// did not end on, with the data token: each must refuse it.
func probeOther(ctx context.Context, d *deployment, m *rehomeMove, rr *rehomeResult) {
	if m.ended == "stuck" {
		m.probe = "not asked (stuck)"
		return
	}
	pc := d.client(10*time.Second, 1)
	defer pc.CloseIdleConnections()
	var said []string
	for _, other := range []string{m.from, m.to} {
		if other == m.at {
			continue
		}
		k := -(len(rr.moves)*2 + len(said) + 1) // below every writer's keys
		body := map[string]any{"query": "insert w {k: $1}", "params": []any{k}}
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, "POST", d.url(other)+"/t/"+m.tenant+"/query", bytes.NewReader(b))
		if err != nil {
			continue
		}
		req.Header.Set("Authorization", "Bearer "+d.tokens["http"])
		res, err := pc.Do(req)
		answer := "no answer"
		if err == nil {
			res.Body.Close()
			answer = fmt.Sprint(res.StatusCode)
			if why := res.Header.Get("Fenec-Refused"); why != "" {
				answer += " " + why
			}
			if res.StatusCode == http.StatusOK {
				rr.seconds++
			}
		}
		rr.probes[answer]++
		said = append(said, other+" "+answer)
	}
	m.probe = strings.Join(said, ", ")
}

// stepWatch polls a router's placements until stopped, keeping each
// tenant's last.
type stepWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex           // guards last
	last   map[string]placement // by tenant
}

func startStepWatch(ctx context.Context, d *deployment, hc *http.Client, router string) *stepWatch {
	wctx, cancel := context.WithCancel(ctx)
	w := &stepWatch{cancel: cancel, last: map[string]placement{}}
	w.wg.Go(func() {
		for wctx.Err() == nil {
			cctx, c := context.WithTimeout(wctx, time.Second)
			now, err := placements(cctx, d, hc, router)
			c()
			if err == nil {
				w.mu.Lock()
				for t, p := range now {
					w.last[t] = p
				}
				w.mu.Unlock()
			}
			select {
			case <-wctx.Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
	})
	return w
}

// stop ends the watch and returns what it saw last.
func (w *stepWatch) stop() map[string]placement {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// stepText names where a move stood as last seen: its step while moving,
// or not begun / done.
func stepText(p placement, m *rehomeMove) string {
	switch {
	case p.Name == "":
		return "not seen"
	case p.State == "moving":
		if p.MoveStep == "" {
			return "moving"
		}
		return p.MoveStep
	case p.Node == m.to:
		return "done"
	case p.Node == m.from:
		return "not begun"
	}
	return p.State + " on " + p.Node
}

// placements is router's placements by tenant.
func placements(ctx context.Context, d *deployment, hc *http.Client, router string) (map[string]placement, error) {
	var rows []placement
	if st, err := call(ctx, hc, "GET", d.url(router)+"/_shard/tenants", d.tokens["router"], nil, &rows); err != nil || st != 200 {
		return nil, fmt.Errorf("placements on %s: %d %v", router, st, err)
	}
	out := make(map[string]placement, len(rows))
	for _, r := range rows {
		out[r.Name] = r
	}
	return out, nil
}

// replicas is router's voting copies by tenant.
func replicas(ctx context.Context, d *deployment, hc *http.Client, router string) (map[string]string, error) {
	var rows []struct {
		Name    string `json:"name"`
		Replica string `json:"replica"`
	}
	if st, err := call(ctx, hc, "GET", d.url(router)+"/_shard/tenants", d.tokens["router"], nil, &rows); err != nil || st != 200 {
		return nil, fmt.Errorf("placements on %s: %d %v", router, st, err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Replica
	}
	return out, nil
}

// nodeIDs maps each node's id (what a node's answer names in Fenec-Node)
// to its name.
func nodeIDs(ctx context.Context, d *deployment, hc *http.Client) (map[string]string, error) {
	var rows []struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	}
	if st, err := call(ctx, hc, "GET", d.url("g1")+"/_shard/nodes", d.tokens["router"], nil, &rows); err != nil || st != 200 {
		return nil, fmt.Errorf("nodes: %d %v", st, err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Name] = r.Name
		if r.ID != "" {
			out[r.ID] = r.Name
		}
	}
	return out, nil
}

// judgeRehome reads every tenant's acknowledged writes, both sides', back
// from the node leader places it on, and measures each move's window.
func judgeRehome(ctx context.Context, d *deployment, hc *http.Client, leader string, ids map[string]string, usSide, euSide []*writer, rr *rehomeResult) error {
	now, err := placements(ctx, d, hc, leader)
	if err != nil {
		return err
	}
	eu := map[string]*writer{}
	for _, w := range euSide {
		eu[w.tenant] = w
	}
	slow := d.client(15*time.Second, 2)
	defer slow.CloseIdleConnections()
	all := map[string][]ack{}
	fails := map[string][]fail{}
	for _, us := range usSide {
		t := us.tenant
		usAcks, _ := us.snapshot()
		euAcks, _ := eu[t].snapshot()
		uf, _ := us.failures()
		ef, _ := eu[t].failures()
		fails[t] = append(uf, ef...)
		acks := append(usAcks, euAcks...)
		slices.SortFunc(acks, func(a, b ack) int { return a.at.Compare(b.at) })
		for i := range acks {
			if n, ok := ids[acks[i].node]; ok {
				acks[i].node = n
			} else {
				rr.unknown++
			}
		}
		all[t] = acks
		p := now[t]
		if p.State != "active" || p.Node == "" {
			rr.notActive = append(rr.notActive, fmt.Sprintf("%s %s on %s", t, p.State, p.Node))
			continue
		}
		have, err := readBack(ctx, slow, d.url(p.Node), d.tokens["http"], t)
		if err != nil {
			return err
		}
		for _, a := range acks {
			rr.acked++
			if !have[a.k] {
				rr.lost++
				if len(rr.lostSome) < 10 {
					rr.lostSome = append(rr.lostSome, fmt.Sprintf("%s k=%d acknowledged by %s through %s at %s, read back from %s",
						t, a.k, a.node, hostOf(a.via), a.at.UTC().Format("15:04:05.000"), p.Node))
				}
			}
		}
	}
	for _, m := range rr.moves {
		m.judge(all[m.tenant], fails[m.tenant])
	}
	return nil
}

// judge measures m's window, from the move asked to the tenant active
// again, in the tenant's acknowledgements (both writers', by time) and
// failures.
func (m *rehomeMove) judge(acks []ack, fails []fail) {
	end := m.settled
	m.gap = longestGap(acks, m.asked, end)
	m.writersSaw = map[string]int{}
	for _, f := range fails {
		if !f.at.Before(m.asked) && f.at.Before(end) {
			m.writersSaw[fmt.Sprintf("%s %s", hostOf(f.via), statusName(f.status))]++
		}
	}
	var first time.Time // the target's first acknowledgement in the window
	for _, a := range acks {
		if a.at.Before(m.asked) || a.at.After(end.Add(time.Second)) {
			continue
		}
		switch a.node {
		case m.to:
			if first.IsZero() {
				first = a.at
			}
		case m.from:
			if !first.IsZero() && a.sent.After(first) {
				m.overlap++
			}
		default:
			m.elsewhere++
		}
	}
}

// problems are what fails the rehome case, whatever -check says.
func (rr *rehomeResult) problems(kase string, run int) []string {
	var out []string
	if rr.lost > 0 {
		out = append(out, fmt.Sprintf("%s #%d lost %d of %d acknowledged writes", kase, run, rr.lost, rr.acked))
	}
	if rr.seconds > 0 {
		out = append(out, fmt.Sprintf("%s #%d: %d moves' other node took a write sent straight to it (two primaries)", kase, run, rr.seconds))
	}
	overlaps, stuck := 0, 0
	for _, m := range rr.moves {
		overlaps += m.overlap
		if m.ended == "stuck" {
			stuck++
		}
	}
	if overlaps > 0 {
		out = append(out, fmt.Sprintf("%s #%d: %d writes acknowledged by a move's source after its target had acknowledged one (two primaries)", kase, run, overlaps))
	}
	if stuck > 0 {
		out = append(out, fmt.Sprintf("%s #%d: %d moves never settled within %v", kase, run, stuck, rehomeSettle))
	}
	if len(rr.notActive) > 0 {
		out = append(out, fmt.Sprintf("%s #%d: tenants not active at the end: %s", kase, run, strings.Join(rr.notActive, ", ")))
	}
	return out
}
