package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// hostileCounts counts what the hostile clients did and met.
type hostileCounts struct {
	slow, hungUp, badToken, held, declared atomic.Int64
	routerFlood, nodeFlood                 floodCounts
	// Tokenless 60 MiB bodies: refused by the router's body budget (429
	// the address's share, 503 the router's), sent whole and refused by
	// the node (401), or cut some other way.
	bodies429, bodies503, bodies401, bodiesOther atomic.Int64
	// Unread readers: answers begun (200), refused for the node's answer
	// memory (503), or answered otherwise.
	readersBegun, readersRefused, readersOther atomic.Int64
	// Heavy statements: given up on by their clients, answered 503 at
	// the statement time bound, or answered whole.
	heavyLeft, heavyStopped, heavyDone atomic.Int64
	// Restores of zeros refused 400 at the image's header, or answered
	// otherwise; /_shard/ requests with long paths refused 401 or 429,
	// or answered otherwise.
	restoreRefused, restoreOther atomic.Int64
	shardRefused, shardOther     atomic.Int64
}

// floodCounts counts a flood's connections: left unanswered at once
// (taken by the server, or refused after the flood stopped waiting), and
// refused at once.
type floodCounts struct{ held, refused atomic.Int64 }

func (h *hostileCounts) String() string {
	return fmt.Sprintf("%d stalled bodies cut, %d early hang-ups, %d bad tokens (%d held off 429), %d bodies of 60 MB declared and never sent; "+
		"a flood of connections had %d unanswered at once (taken, or refused late) and %d refused 429 on the router, %d and %d on a node; "+
		"tokenless 60 MiB bodies: %d refused 429, %d refused 503, %d sent whole and refused 401, %d cut otherwise; "+
		"unread readers: %d answers begun, %d refused 503; heavy statements: %d left by their clients, %d stopped at the time bound, %d answered; "+
		"restores of zeros: %d refused 400, %d otherwise; /_shard/ with long paths: %d refused, %d otherwise",
		h.slow.Load(), h.hungUp.Load(), h.badToken.Load(), h.held.Load(), h.declared.Load(),
		h.routerFlood.held.Load(), h.routerFlood.refused.Load(), h.nodeFlood.held.Load(), h.nodeFlood.refused.Load(),
		h.bodies429.Load(), h.bodies503.Load(), h.bodies401.Load(), h.bodiesOther.Load(),
		h.readersBegun.Load(), h.readersRefused.Load(), h.heavyLeft.Load(), h.heavyStopped.Load(), h.heavyDone.Load(),
		h.restoreRefused.Load(), h.restoreOther.Load(), h.shardRefused.Load(), h.shardOther.Load())
}

// Each address's bound on connections in the soak (--max-conns-per-addr):
// low enough that a flood meets it within its first batches on a loaded
// machine, above what any other client of the soak opens from one
// address — on the router, the test's own clients from 127.0.0.1 (the
// writers', the light tenant's, and a keep-alive connection left by
// every operator call the checks make); on a node, the unread readers
// (soakPlan.readers/2, 20 at most), the router's address being spared
// once the router proved itself.
const (
	soakRouterPerAddr = 128
	soakNodePerAddr   = 32
)

// floodConns opens connections to addr from ip, sixteen at a time, and
// keeps up to hold of them open, sending nothing: a stranger taking a
// server's connections. A connection answered at once is a refusal (it
// must be 429); one left unanswered was taken, and is held. All are
// closed at the end.
func floodConns(ctx context.Context, addr, ip string, hold int, h *floodCounts) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	buf := make([]byte, 12)
	for ctx.Err() == nil {
		var batch []net.Conn
		for range 16 {
			if c, err := dialFrom(ctx, addr, ip); err == nil {
				batch = append(batch, c)
			}
		}
		// One wait for the whole batch: a refusal is written as the
		// connection is taken.
		deadline := time.Now().Add(10 * time.Millisecond)
		for _, c := range batch {
			c.SetReadDeadline(deadline)
			n, err := io.ReadFull(c, buf)
			switch {
			case n == len(buf) && string(buf) == "HTTP/1.1 429":
				h.refused.Add(1)
				c.Close()
			case n == 0 && errors.Is(err, os.ErrDeadlineExceeded):
				c.SetReadDeadline(time.Time{})
				held = append(held, c)
				h.held.Add(1)
				if len(held) > hold {
					held[0].Close()
					held = held[1:]
				}
			default: // closed by the server (its header timeout): not a refusal
				c.Close()
			}
		}
	}
}

// dialFrom dials addr from the local ip, bounded by ctx.
func dialFrom(ctx context.Context, addr, ip string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { c.Close() })
	return c, nil
}

// slowBodies sends heads declaring a body, a few bytes of it, then stalls
// until the server cuts the body (408) or the soak ends.
func slowBodies(ctx context.Context, addr, ip string, h *hostileCounts) {
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, addr, ip)
		if err != nil {
			continue
		}
		fmt.Fprintf(c, "POST /t/w1/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"query\"", dataToken)
		if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			if res.StatusCode == http.StatusRequestTimeout {
				h.slow.Add(1)
			}
			res.Body.Close()
		}
		c.Close()
	}
}

// hangUps sends whole writes and reads and hangs up at once, before or as
// their answers come, on the same router→node pools the writers use.
func hangUps(ctx context.Context, addr, ip, tenant string, h *hostileCounts) {
	for i := 0; ctx.Err() == nil; i++ {
		c, err := dialFrom(ctx, addr, ip)
		if err != nil {
			continue
		}
		body := fmt.Sprintf(`{"query": "put kv {k: $1, v: 1}", "params": ["hang-%s-%d"]}`, ip, i)
		if i%2 == 1 {
			body = `{"query": "get kv limit 5"}`
		}
		fmt.Fprintf(c, "POST /t/%s/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
			tenant, dataToken, len(body), body)
		if i%3 == 0 {
			time.Sleep(time.Duration(i%7) * 100 * time.Microsecond)
		}
		c.Close()
		h.hungUp.Add(1)
		pause(ctx, time.Millisecond)
	}
}

// badTokens sends requests with wrong tokens through the router, and
// counts the refusals that hold it off.
func badTokens(ctx context.Context, base, ip string, h *hostileCounts) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer hc.CloseIdleConnections()
	for i := 0; ctx.Err() == nil; i++ {
		path := "/t/w2/query"
		if i%4 == 3 {
			path = "/t/w2/_replication?since=0&history=0"
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(`{"query": "get kv"}`))
		req.Header.Set("Authorization", "Bearer wrong-"+strconv.Itoa(i))
		res, err := hc.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		h.badToken.Add(1)
		if res.StatusCode == http.StatusTooManyRequests {
			h.held.Add(1)
		}
	}
}

// hugeDeclared keeps a few connections declaring 60 MB bodies that never
// come, opening new ones as the router cuts them.
func hugeDeclared(ctx context.Context, addr, ip string, h *hostileCounts) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := dialFrom(ctx, addr, ip)
				if err != nil {
					continue
				}
				fmt.Fprintf(c, "POST /t/w2/batch HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 60<<20)
				h.declared.Add(1)
				io.Copy(io.Discard, c) // until the cut, or the soak's end
				c.Close()
			}
		})
	}
	wg.Wait()
}

// soakWriter writes rows w<w>-<i> to tenant until ctx ends and returns the
// keys acknowledged. Each request carries its own request id, which the
// answer must carry back, and every few writes the row is read back.
func soakWriter(ctx context.Context, base, tenant string, w int, failures chan<- string) []string {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer hc.CloseIdleConnections()
	fail := func(f string, a ...any) {
		select {
		case failures <- fmt.Sprintf("writer %d: ", w) + fmt.Sprintf(f, a...):
		default:
		}
	}
	do := func(id, body string) (int, string, bool) {
		rctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, "POST", base+"/t/"+tenant+"/query", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+dataToken)
		req.Header.Set("X-Request-Id", id)
		res, err := hc.Do(req)
		if err != nil {
			fail("%s: %v", id, err)
			return 0, "", false
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if got := res.Header.Get("X-Request-Id"); got != id {
			fail("%s answered with request id %q: %d %s", id, got, res.StatusCode, b)
			return 0, "", false
		}
		return res.StatusCode, strings.TrimSpace(string(b)), true
	}
	var keys []string
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("w%d-%06d", w, i)
		q, _ := json.Marshal(map[string]any{"query": "put kv {k: $1, v: $2}", "params": []any{key, i}})
		code, body, ok := do(key+"-put", string(q))
		if !ok {
			return keys
		}
		if code != 200 || !strings.HasPrefix(body, `{"affected":1,"ids":[`) {
			fail("%s: %d %s", key, code, body)
			return keys
		}
		keys = append(keys, key)
		if i%5 != 0 {
			continue
		}
		q, _ = json.Marshal(map[string]any{"query": "get kv where k = $1 select k, v", "params": []any{key}})
		code, body, ok = do(key+"-get", string(q))
		if !ok {
			return keys
		}
		if want := fmt.Sprintf(`[{"k":%q,"v":%d}]`, key, i); code != 200 || body != want {
			fail("read back %s: %d %s, want %s", key, code, body, want)
			return keys
		}
	}
	return keys
}

// watchPeaks samples each process's resident peak until ctx ends; the
// function it returns waits for the sampling to end and gives each peak,
// logged.
func watchPeaks(ctx context.Context, t *testing.T, procs map[string]*cluster.Proc) func() map[string]int64 {
	peaks := map[string]int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for name, p := range procs {
				if _, peak, err := p.Memory(); err == nil && peak > peaks[name] {
					peaks[name] = peak
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() map[string]int64 {
		<-done
		for name, p := range procs {
			if _, peak, err := p.Memory(); err == nil && peak > peaks[name] {
				peaks[name] = peak
			}
			t.Logf("%s: resident peak %d MiB", name, peaks[name]>>20)
		}
		return peaks
	}
}
