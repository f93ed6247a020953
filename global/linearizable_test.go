package global

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The register model of one key: its value and mod revision (0: absent).
type regState struct {
	value string
	rev   int64
}

type regInput struct {
	cas      bool
	expect   int64  // cas: the revision read
	newValue string // cas: the value written
}

type regOutput struct {
	ok    bool   // cas: the condition held
	rev   int64  // get: the key's mod revision; cas: the revision written
	value string // get
}

var registerModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		if !in.cas {
			return out.value == s.value && out.rev == s.rev, s
		}
		if !out.ok {
			return s.rev != in.expect, s
		}
		if s.rev != in.expect || out.rev <= s.rev {
			return false, s
		}
		return true, regState{value: in.newValue, rev: out.rev}
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%+v -> %+v", input, output)
	},
}

// testCASLinearizable runs clients that read a key and compare-and-swap it
// on what they read, all at once, and checks that the history of what they
// saw is linearizable against a register with revisions.
func testCASLinearizable(t *testing.T, open func(testing.TB) Directory) {
	d := open(t)
	ctx := testCtx(t)
	const clients, rounds = 4, 25
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in regInput, out regOutput, call time.Duration) {
		ret := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Output: out,
			Call: call.Nanoseconds(), Return: ret.Nanoseconds()})
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for i := range rounds {
				call := time.Since(start)
				kv, err := d.Get(ctx, "reg")
				if err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
				record(c, regInput{}, regOutput{rev: kv.ModRev, value: string(kv.Value)}, call)
				in := regInput{cas: true, expect: kv.ModRev, newValue: fmt.Sprintf("c%d-%d", c, i)}
				call = time.Since(start)
				rev, err := d.Txn(ctx, []Cond{IfModRev("reg", in.expect)}, []Op{OpPut("reg", []byte(in.newValue))})
				switch {
				case err == nil:
					record(c, in, regOutput{ok: true, rev: rev}, call)
				case errors.Is(err, ErrConflict):
					record(c, in, regOutput{}, call)
				default:
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if res := porcupine.CheckOperationsTimeout(registerModel, history, 20*time.Second); res != porcupine.Ok {
		t.Fatalf("history of %d operations: %s", len(history), res)
	}
}

// The model itself refuses what it must: a lost update.
func TestRegisterModelRefusesLostUpdate(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 0, Input: regInput{cas: true, expect: 0, newValue: "a"}, Output: regOutput{ok: true, rev: 5}, Call: 0, Return: 1},
		{ClientId: 1, Input: regInput{cas: true, expect: 0, newValue: "b"}, Output: regOutput{ok: true, rev: 6}, Call: 2, Return: 3},
	}
	if porcupine.CheckOperations(registerModel, ops) {
		t.Fatal("two swaps from the same revision both succeeding passed the check")
	}
	ops[1].Output = regOutput{}
	if !porcupine.CheckOperations(registerModel, ops) {
		t.Fatal("a swap refused after another won failed the check")
	}
}
