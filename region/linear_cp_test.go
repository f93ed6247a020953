package region

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fenec-go/fenec/internal/testkit"
)

// regOp is one operation on a register held in a document: a write of v
// or a read that saw v.
type regOp struct {
	write bool
	v     int64
}

// registerModel is one integer register.
var registerModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regOp)
		if in.write {
			return true, in.v
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regOp)
		if in.write {
			return fmt.Sprintf("write(%d)", in.v)
		}
		return fmt.Sprintf("read() -> %v", output)
	},
}

// regClient writes and reads the register through the router, keeping
// every operation that answered. A write refused 503 (frozen) never ran
// and is left out; any other answer fails the test at the end.
type regClient struct {
	url   string
	id    int
	base  time.Time
	next  *atomic.Int64
	ops   []porcupine.Operation
	wrong []string
}

func (c *regClient) run(stop *atomic.Bool) {
	for i := 0; !stop.Load(); i++ {
		if (i+c.id)%3 == 0 {
			c.write()
		} else {
			c.read()
		}
	}
}

func (c *regClient) now() int64 { return int64(time.Since(c.base)) }

func (c *regClient) write() {
	v := c.next.Add(1)
	call := c.now()
	st, body := regSend(http.MethodPatch, c.url+"?k=eq.reg", fmt.Sprintf(`{"v": %d}`, v))
	ret := c.now()
	switch {
	case st == http.StatusOK && strings.Contains(body, `"updated":1`):
		c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: regOp{write: true, v: v}, Call: call, Output: nil, Return: ret})
	case st == http.StatusServiceUnavailable:
	default:
		c.wrong = append(c.wrong, fmt.Sprintf("write: %d %s", st, body))
	}
}

func (c *regClient) read() {
	call := c.now()
	st, body := regSend(http.MethodGet, c.url+"?k=eq.reg&select=v", "")
	ret := c.now()
	var rows []struct {
		V int64 `json:"v"`
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &rows) != nil || len(rows) != 1 {
		c.wrong = append(c.wrong, fmt.Sprintf("read: %d %s", st, body))
		return
	}
	c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: regOp{}, Call: call, Output: rows[0].V, Return: ret})
}

// regSend is one request; a transport error is status 0.
func regSend(method, url, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	resp, err := cpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMoveLinearizableCP checks that a tenant moved back and forth under
// concurrent writers and readers through the router behaves as one
// register: served from exactly one node at every moment.
func TestMoveLinearizableCP(t *testing.T) {
	r := startCPRouter(t, nil)
	n1, n2 := startCPNode(t), startCPNode(t)
	r.addNode(t, "n1", n1)
	r.addNode(t, "n2", n2)
	r.place(t, "lin", "n1")
	r.mustQuery(t, "lin", "create collection reg (k text @unique, v int)")
	r.mustQuery(t, "lin", "put reg {k: 'reg', v: 0}")

	var stop atomic.Bool
	var next atomic.Int64
	base := time.Now()
	clients := make([]*regClient, 4)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = &regClient{url: r.url + "/t/lin/reg", id: i, base: base, next: &next}
		wg.Go(func() { clients[i].run(&stop) })
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	count := func() int {
		return int(next.Load())
	}
	for i, to := range []string{"n2", "n1", "n2"} {
		at := count()
		testkit.Eventually(t, cpWait, func() error {
			if count() < at+20 {
				return fmt.Errorf("%d writes since the last move", count()-at)
			}
			return nil
		})
		if st, b := r.shard(t, http.MethodPost, "tenants/lin/move", map[string]any{"to": to}, nil); st != http.StatusOK {
			t.Fatalf("move %d: %d %s", i, st, b)
		}
	}
	at := count()
	testkit.Eventually(t, cpWait, func() error {
		if count() < at+20 {
			return fmt.Errorf("%d writes since the last move", count()-at)
		}
		return nil
	})
	stop.Store(true)
	wg.Wait()

	var ops []porcupine.Operation
	for _, c := range clients {
		if len(c.wrong) > 0 {
			t.Fatalf("client %d had answers neither ok nor 503: %v", c.id, c.wrong[:min(5, len(c.wrong))])
		}
		ops = append(ops, c.ops...)
	}
	res := porcupine.CheckOperationsTimeout(registerModel, ops, cpWait)
	if res != porcupine.Ok {
		t.Fatalf("history of %d operations across three moves: %s", len(ops), res)
	}
	t.Logf("%d operations across three moves: linearizable", len(ops))
}
