package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// soakAttacks are the soak's hostile clients, each from an address of its
// own (127.0.0.x) so that each meets its own per-address bounds.
type soakAttacks struct {
	plan   soakPlan
	router *cluster.Router
	node   *cluster.Node // the node of the light and heavy tenants
	hits   *hostileCounts
	heavy  map[string][]byte // heavy statements' bodies, by kind
}

// start runs every attack until ctx ends, each goroutine owned by wg;
// FENEC_SOAK_ONLY (a comma-separated list of soakAttackNames) runs only
// those, to tell which one costs the light tenant what.
func (a soakAttacks) start(ctx context.Context, wg *sync.WaitGroup) {
	r, n, h := a.router, a.node, a.hits
	on := soakAttacksOn()
	if on["slow"] {
		for range 3 {
			wg.Go(func() { slowBodies(ctx, r.Addr(), "127.0.0.2", h) })
		}
		wg.Go(func() { slowBodies(ctx, n.Direct(), "127.0.0.6", h) })
	}
	if on["hangups"] {
		for i := range 3 {
			wg.Go(func() { hangUps(ctx, r.Addr(), "127.0.0.3", fmt.Sprintf("junk%d", i%2+1), h) })
		}
	}
	if on["tokens"] {
		wg.Go(func() { badTokens(ctx, r.URL(), "127.0.0.4", h) })
	}
	if on["declared"] {
		wg.Go(func() { hugeDeclared(ctx, r.Addr(), "127.0.0.5", h) })
	}
	if on["floods"] {
		wg.Go(func() { floodConns(ctx, r.Addr(), "127.0.0.7", 3*soakRouterPerAddr, &h.routerFlood) })
		wg.Go(func() { floodConns(ctx, n.Direct(), "127.0.0.8", 2*soakNodePerAddr, &h.nodeFlood) })
	}
	if on["readers"] {
		for range a.plan.readers {
			wg.Go(func() { unreadReader(ctx, r.Addr(), "127.0.0.9", dataToken, h) })
		}
		for range a.plan.readers / 2 {
			wg.Go(func() { unreadReader(ctx, n.Direct(), "127.0.0.10", dataToken, h) })
		}
	}
	if on["heavy"] {
		for _, body := range a.heavy {
			wg.Go(func() { heavyStatements(ctx, r.URL(), "127.0.0.11", body, h) })
		}
	}
	if on["bodies"] {
		for _, ip := range soakBodyAddrs {
			for range 4 {
				wg.Go(func() { bigBodies(ctx, r.Addr(), ip, h) })
			}
		}
	}
	if on["shard"] {
		for _, ip := range soakShardAddrs {
			wg.Go(func() { shardFlood(ctx, r.URL(), ip, h) })
		}
	}
	if on["restore"] {
		wg.Go(func() { restoreZeros(ctx, r.Addr(), "127.0.0.19", h) })
	}
}

// soakAttackNames name the soak's attacks, for FENEC_SOAK_ONLY.
var soakAttackNames = []string{"slow", "hangups", "tokens", "declared", "floods", "readers", "heavy", "bodies", "shard", "restore"}

// soakAttacksOn are the attacks to run: every one, or those
// FENEC_SOAK_ONLY names.
func soakAttacksOn() map[string]bool {
	on := map[string]bool{}
	only := os.Getenv("FENEC_SOAK_ONLY")
	for _, name := range soakAttackNames {
		on[name] = only == ""
	}
	for _, name := range strings.Split(only, ",") {
		if name != "" {
			on[strings.TrimSpace(name)] = true
		}
	}
	return on
}

// soakBodyAddrs are the addresses of the tokenless 60 MiB bodies: two,
// each holding its share of the router's body budget, which together
// leave room for everyone else's bodies (soakBodyMemory).
var soakBodyAddrs = []string{"127.0.0.12", "127.0.0.13"}

// soakShardAddrs are the addresses of the /_shard/ flood, which the
// router's audit log counts one by one.
var soakShardAddrs = []string{"127.0.0.15", "127.0.0.16", "127.0.0.17", "127.0.0.18"}

// heavyBodies are the heavy statements over the collection big: an `in`
// over a list of n values (parsed and hashed once; every row looked up
// in it), and a pattern that every row's run of p's makes a long scan.
func heavyBodies(n int) map[string][]byte {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("value-%07d", i)
	}
	in, _ := json.Marshal(map[string]any{"query": "get big where body in $1 count", "params": []any{vals}})
	pattern, _ := json.Marshal(map[string]any{"query": `get big where body ~ "p{1,900}z" count`})
	return map[string][]byte{"in": in, "pattern": pattern}
}

// soakBody is the tokenless bodies' length: below the router's --max-body
// (64 MiB), so that only the body budget stands in the way.
const soakBody = 60 << 20

// bigBodies sends tokenless 60 MiB bodies of zeros from ip as fast as the
// router takes them, one at a time on a connection, and counts how each
// ended: refused by the router's body budget as it arrived (429, 503),
// sent whole and refused by the node for its missing token (401), or cut.
func bigBodies(ctx context.Context, addr, ip string, h *hostileCounts) {
	chunk := make([]byte, 256<<10)
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, addr, ip)
		if err != nil {
			continue
		}
		answered := make(chan int, 1)
		go func() { // owned: answered is waited for below, the conn closed
			code := 0
			if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				code = res.StatusCode
				res.Body.Close()
			}
			answered <- code
		}()
		fmt.Fprintf(c, "POST /t/w2/batch HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", soakBody)
		for sent := 0; sent < soakBody; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				break
			}
		}
		code := <-answered
		c.Close()
		pause(ctx, 50*time.Millisecond)
		switch code {
		case http.StatusTooManyRequests:
			h.bodies429.Add(1)
		case http.StatusServiceUnavailable:
			h.bodies503.Add(1)
		case http.StatusUnauthorized:
			h.bodies401.Add(1)
		default:
			h.bodiesOther.Add(1)
		}
	}
}

// unreadReader asks for the whole collection big, reads the status line
// of the answer and nothing more, holds the connection for two seconds
// (the server cuts it after its --body-timeout) and asks again.
func unreadReader(ctx context.Context, addr, ip, token string, h *hostileCounts) {
	body := `{"query": "get big"}`
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, addr, ip)
		if err != nil {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		fmt.Fprintf(c, "POST /t/heavy/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
			token, len(body), body)
		status := make([]byte, 12)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, status); err == nil {
			switch string(status) {
			case "HTTP/1.1 200":
				h.readersBegun.Add(1)
			case "HTTP/1.1 503":
				h.readersRefused.Add(1)
			default:
				h.readersOther.Add(1)
			}
		}
		pause(ctx, 2*time.Second)
		c.Close()
	}
}

// heavyStatements sends body, a heavy statement of the tenant heavy, one
// at a time, in turn hanging up after 300 ms (the node stops the
// statement) and waiting for the node's --max-statement-time (answered
// 503).
func heavyStatements(ctx context.Context, base, ip string, body []byte, h *hostileCounts) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer hc.CloseIdleConnections()
	for i := 0; ctx.Err() == nil; i++ {
		patience := 300 * time.Millisecond
		if i%2 == 1 {
			patience = 10 * time.Second
		}
		rctx, cancel := context.WithTimeout(ctx, patience)
		req, _ := http.NewRequestWithContext(rctx, "POST", base+"/t/heavy/query", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+dataToken)
		res, err := hc.Do(req)
		switch {
		case err != nil:
			h.heavyLeft.Add(1)
		case res.StatusCode == http.StatusServiceUnavailable:
			h.heavyStopped.Add(1)
		default:
			h.heavyDone.Add(1)
		}
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		cancel()
		pause(ctx, 100*time.Millisecond)
	}
}

// shardFlood asks the router's /_shard/ with no token and 32 KiB paths,
// each refused (401, then 429 once the address is held off) and each
// refusal a case for the audit log.
func shardFlood(ctx context.Context, base, ip string, h *hostileCounts) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer hc.CloseIdleConnections()
	long := strings.Repeat("x", 32<<10)
	for i := 0; ctx.Err() == nil; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/_shard/tenants/%d%s", base, i, long), nil)
		res, err := hc.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusTooManyRequests {
			h.shardRefused.Add(1)
		} else {
			h.shardOther.Add(1)
		}
		pause(ctx, 2*time.Millisecond)
	}
}

// restoreZeros restores the tenant junk1 through the router, with the
// router's token, from a body of a GiB of zeros: no image, refused 400
// at its header, nothing written, while the zeros keep coming.
func restoreZeros(ctx context.Context, addr, ip string, h *hostileCounts) {
	chunk := make([]byte, 256<<10)
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, addr, ip)
		if err != nil {
			continue
		}
		var sending sync.WaitGroup
		sending.Go(func() {
			fmt.Fprintf(c, "PUT /_shard/tenants/junk1/file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
				cluster.RouterToken, 1<<30)
			for sent := 0; sent < 1<<30; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		})
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err == nil && res.StatusCode == http.StatusBadRequest:
			h.restoreRefused.Add(1)
		case err == nil:
			h.restoreOther.Add(1)
		case ctx.Err() == nil:
			h.restoreOther.Add(1)
		}
		c.Close()
		sending.Wait()
		pause(ctx, 200*time.Millisecond)
	}
}

// pause waits d, or until ctx ends: the attackers' pace, which exercises
// the servers' bounds without spending the machine's cores on sending.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
