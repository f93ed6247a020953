package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fenec-go/fenec/tests/cluster"
)

// regInput is one operation on the register: a read, or a write of v.
type regInput struct {
	write bool
	v     int64
}

// registerModel is one integer register, starting at 0.
var registerModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.v
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("write(%d)", in.v)
		}
		return fmt.Sprintf("read() -> %d", output)
	},
}

// history gathers operations from several clients.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation // guarded by mu
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(op porcupine.Operation) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
	return len(h.ops)
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// regClient reads and writes the register through the router until ctx
// ends. Writes carry an Idempotency-Key and are sent again until
// answered 200, so each has one outcome; reads are sent again too. An
// operation cut short by the end of the test is recorded as still open.
func regClient(ctx context.Context, t *testing.T, c *cluster.Client, id int, h *history) {
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	for i := 0; ctx.Err() == nil; i++ {
		in := regInput{write: rng.IntN(2) == 0, v: int64(id*1_000_000 + i + 1)}
		op := porcupine.Operation{ClientId: id, Input: in, Call: h.now()}
		for {
			var r *cluster.Resp
			if in.write {
				r = c.DoCtx(ctx, "PATCH", "/t/lin/kv?k=eq.x", fmt.Sprintf(`{"v": %d}`, in.v),
					"Idempotency-Key", "c"+strconv.Itoa(id)+"-"+strconv.Itoa(i))
			} else {
				r = c.DoCtx(ctx, "GET", "/t/lin/kv?k=eq.x&select=v", nil)
			}
			if ctx.Err() != nil {
				if in.write { // it may have landed: open until the end
					op.Return = math.MaxInt64
					h.add(op)
				}
				return
			}
			if r.Status != 200 {
				continue // frozen for the move (503) or not forwarded yet: ask again
			}
			if in.write {
				op.Output = int64(0)
			} else {
				var rows []struct{ V int64 }
				if err := json.Unmarshal(r.Body, &rows); err != nil || len(rows) != 1 {
					t.Errorf("client %d read: %s", id, r)
					return
				}
				op.Output = rows[0].V
			}
			op.Return = h.now()
			h.add(op)
			break
		}
	}
}

// TestLinearizableThroughMoves runs four clients reading and writing one
// register through the router while the tenant moves to another node and
// back, and checks the history is linearizable: no move loses a write or
// lets a read see an older value than one already read.
func TestLinearizableThroughMoves(t *testing.T) {
	r, n1 := oneNode(t)
	c := r.Client()
	n2 := startSecondNode(t, r)
	r.Place("lin", n1)
	c.MustQuery("lin", "create collection kv (k text @unique, v int)")
	c.MustQuery("lin", "put kv {k: 'x', v: 0}")

	h := &history{start: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for id := range 4 {
		cl := cluster.NewClient(t, r.URL(), cluster.RouterToken)
		wg.Go(func() { regClient(ctx, t, cl, id, h) })
	}
	atLeast := func(n int) {
		t.Helper()
		cluster.Eventually(t, wait, func() error {
			if got := h.len(); got < n {
				return fmt.Errorf("%d operations, want %d", got, n)
			}
			return nil
		})
	}
	atLeast(100)
	for _, to := range []*cluster.Node{n2, n1} {
		wantStatus(t, c.Do("POST", "/_shard/tenants/lin/move", map[string]any{"to": to.Name}), 200, "move to "+to.Name)
		atLeast(h.len() + 100)
	}
	cancel()
	wg.Wait()

	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	checkLinearizable(t, "the register through two moves", ops)
	t.Logf("%d operations through two moves, linearizable", len(ops))
}

// checkLinearizable fails t when ops are not a linearizable history of the
// register, logging every operation by when it was called (ms since the
// history began; a write cut short by the test's end never returned) so a
// failure on a machine nobody can reach still says what happened.
func checkLinearizable(t *testing.T, what string, ops []porcupine.Operation) {
	t.Helper()
	res := porcupine.CheckOperationsTimeout(registerModel, ops, 30*time.Second)
	if res == porcupine.Ok {
		t.Logf("%s: %d operations, linearizable", what, len(ops))
		return
	}
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	var b strings.Builder
	ms := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64) }
	for _, op := range sorted {
		ret := "never"
		if op.Return != math.MaxInt64 {
			ret = ms(op.Return)
		}
		fmt.Fprintf(&b, "\n  client %3d  %9s .. %9s  %s", op.ClientId, ms(op.Call), ret,
			registerModel.DescribeOperation(op.Input, op.Output))
	}
	t.Fatalf("%s: %d operations are %v:%s", what, len(ops), res, b.String())
}

// TestRegisterModel checks the model itself: a read of a value older than
// one already read, after the write that replaced it ended, is refused.
func TestRegisterModel(t *testing.T) {
	w := func(id int, v, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: id, Input: regInput{write: true, v: v}, Call: call, Output: int64(0), Return: ret}
	}
	rd := func(id int, v, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: id, Input: regInput{}, Call: call, Output: v, Return: ret}
	}
	for _, tt := range []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"read after write", []porcupine.Operation{w(0, 5, 0, 10), rd(1, 5, 20, 30)}, true},
		{"read overlapping write", []porcupine.Operation{w(0, 5, 0, 30), rd(1, 0, 10, 20)}, true},
		{"open write seen", []porcupine.Operation{w(0, 5, 0, math.MaxInt64), rd(1, 5, 10, 20)}, true},
		{"lost write", []porcupine.Operation{w(0, 5, 0, 10), rd(1, 0, 20, 30)}, false},
		{"stale after newer", []porcupine.Operation{w(0, 5, 0, 10), w(0, 6, 20, 30), rd(1, 6, 40, 50), rd(2, 5, 60, 70)}, false},
	} {
		if got := porcupine.CheckOperations(registerModel, tt.ops); got != tt.want {
			t.Errorf("%s: linearizable %v, want %v", tt.name, got, tt.want)
		}
	}
}
