package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/region/forward"
)

// ack is one write acknowledged to its client.
type ack struct {
	n     int
	began time.Duration // since the cut (negative: before)
	done  time.Duration
}

// tenantRun is what one tenant's writers saw.
type tenantRun struct {
	mu         sync.Mutex
	routerAcks []ack         // guarded by mu
	ownAcks    []ack         // guarded by mu
	resumed    time.Duration // guarded by mu: first router ack begun after the cut (-1: none)
	refused    time.Duration // guarded by mu: n1's first lease refusal after the cut (-1: none)
	own500     int           // guarded by mu: n1's own writes answered 500 outcome unknown
	cutAt      *time.Time    // set before the cut; read-only after
	cutOnce    chan struct{} // closed at the cut
}

func (tr *tenantRun) since(t time.Time) time.Duration {
	select {
	case <-tr.cutOnce:
		return t.Sub(*tr.cutAt)
	default:
		return -1 << 62
	}
}

// oneRun starts a fresh cluster with lease l, writes, cuts n1 off, and
// measures.
func oneRun(cfg config, l time.Duration) (result, error) {
	cl, err := startCluster(cfg, l)
	defer cl.close()
	if err != nil {
		return result{}, err
	}
	before, err := cl.cutCounts()
	if err != nil {
		return result{}, err
	}
	cutAt := new(time.Time)
	cutCh := make(chan struct{})
	runs := make([]*tenantRun, cfg.tenants)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer direct.CloseIdleConnections()
	for i := range runs {
		tr := &tenantRun{resumed: -1, refused: -1, cutAt: cutAt, cutOnce: cutCh}
		runs[i] = tr
		t := tenantName(i)
		wg.Go(func() { cl.routerWriter(ctx, t, tr) })
		wg.Go(func() { ownWriter(ctx, direct, "http://"+cl.n1Addr, t, tr) })
	}
	time.Sleep(l / 2) // writes under the lease before the cut
	*cutAt = time.Now()
	cl.proxy.cut()
	close(cutCh)
	lapsed := make(chan time.Duration, 1)
	wg.Go(func() { lapsed <- watchLapse(ctx, direct, "http://"+cl.n1Addr, *cutAt) })

	deadline := time.Now().Add(10*l + 30*time.Second)
	for time.Now().Before(deadline) {
		if allSeen(runs) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if !allSeen(runs) {
		return result{}, fmt.Errorf("not every tenant stopped on n1 and resumed on n2 within %v", 10*l+30*time.Second)
	}
	after, err := cl.cutCounts()
	if err != nil {
		return result{}, err
	}
	res := result{
		lapsed:    <-lapsed,
		cutResent: after[forward.CutResent] - before[forward.CutResent],
		cut502:    after[forward.CutFailed502] - before[forward.CutFailed502],
	}
	for i, tr := range runs {
		t := tenantName(i)
		if on := cl.placedOn(t); on != "n2" {
			return result{}, fmt.Errorf("%s on %q after the failover", t, on)
		}
		res.stopped = max(res.stopped, tr.refused)
		res.own500 += tr.own500
		res.resumed = max(res.resumed, tr.resumed)
		held, err := cl.values(t)
		if err != nil {
			return result{}, err
		}
		for _, a := range tr.routerAcks {
			if !held[a.n] {
				res.lostRouter++
			}
		}
		for _, a := range tr.ownAcks {
			switch {
			case held[a.n]:
			case a.began >= 0:
				res.lostOwn++
			default:
				res.lostOwnBefore++
			}
			if a.began > tr.resumed {
				res.twoPrimaries++
			}
		}
	}
	return res, nil
}

// allSeen: every tenant was refused on n1 and took a write on n2.
func allSeen(runs []*tenantRun) bool {
	for _, tr := range runs {
		tr.mu.Lock()
		ok := tr.refused >= 0 && tr.resumed >= 0
		tr.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// routerWriter inserts rows through the router, each with its own
// Idempotency-Key, sent again until acknowledged.
func (cl *cluster) routerWriter(ctx context.Context, t string, tr *tenantRun) {
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf(`{"n": %d, "who": "router"}`, i)
		for ctx.Err() == nil {
			began := time.Now()
			st := post(ctx, cl.c, cl.url+"/t/"+t+"/c", body, "Idempotency-Key", t+"-"+strconv.Itoa(i))
			if st != http.StatusCreated {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			a := ack{n: i, began: tr.since(began), done: tr.since(time.Now())}
			tr.mu.Lock()
			tr.routerAcks = append(tr.routerAcks, a)
			if a.began >= 0 && tr.resumed < 0 {
				tr.resumed = a.done
			}
			tr.mu.Unlock()
			break
		}
	}
}

// ownWriter inserts rows straight to n1, as a client of its own would.
func ownWriter(ctx context.Context, c *http.Client, n1, t string, tr *tenantRun) {
	for i := 1_000_000; ctx.Err() == nil; i++ {
		began := time.Now()
		st := post(ctx, c, n1+"/t/"+t+"/c", fmt.Sprintf(`{"n": %d, "who": "own"}`, i), "X-Bench", "own")
		since := tr.since(began)
		tr.mu.Lock()
		switch {
		case st == http.StatusCreated:
			tr.ownAcks = append(tr.ownAcks, ack{n: i, began: since, done: tr.since(time.Now())})
		case st == http.StatusInternalServerError:
			tr.own500++
		case st == http.StatusServiceUnavailable && since >= 0 && tr.refused < 0:
			tr.refused = tr.since(time.Now())
		}
		tr.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// post sends one write and returns its status (0: no answer).
func post(ctx context.Context, c *http.Client, url, body, hk, hv string) int {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set(hk, hv)
	res, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// values reads every n tenant t holds, through the router.
func (cl *cluster) values(t string) (map[int]bool, error) {
	b, err := cl.call("GET", "/t/"+t+"/c?select=n", "", 200)
	if err != nil {
		return nil, err
	}
	var rows []struct{ N int }
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, err
	}
	out := make(map[int]bool, len(rows))
	for _, r := range rows {
		out[r.N] = true
	}
	return out, nil
}

// watchLapse polls n1's lease (straight to it, not through the proxy)
// and returns when, after the cut, it first held none: from then on its
// write gate refuses every write. -1: ctx ended first.
func watchLapse(ctx context.Context, c *http.Client, n1 string, cutAt time.Time) time.Duration {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, "GET", n1+"/_admin/lease", nil)
		if err != nil {
			return -1
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := c.Do(req)
		if err == nil {
			var st struct {
				LeftMS int64 `json:"left_ms"`
			}
			derr := json.NewDecoder(res.Body).Decode(&st)
			res.Body.Close()
			if derr == nil && st.LeftMS == 0 {
				return time.Since(cutAt)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return -1
}
