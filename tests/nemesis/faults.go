package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenec-go/fenec/internal/nemesis"
)

// The faults the scenarios draw from. Each is recorded in the history as
// it begins and ends; each is undone by HealAll.

// Pause stops n with SIGSTOP: it holds its sockets and answers nothing.
func (t *Topo) Pause(n *Node) *Fault {
	f := t.h.Begin("pause", n.Name, "SIGSTOP")
	n.Proc.Pause()
	n.paused = true
	return f
}

// Continue ends a Pause.
func (t *Topo) Continue(n *Node, f *Fault) {
	if n.paused {
		n.Proc.Continue()
		n.paused = false
	}
	t.h.End(f)
}

// KillNode kills n with SIGKILL.
func (t *Topo) KillNode(n *Node) *Fault {
	f := t.h.Begin("kill", n.Name, "SIGKILL")
	if n.paused {
		n.Proc.Continue()
		n.paused = false
	}
	n.Proc.Kill()
	n.down = true
	return f
}

// StartNode starts a killed node again and waits for it to answer; one
// that does not is an anomaly.
func (t *Topo) StartNode(n *Node, f *Fault) {
	if !n.down {
		return
	}
	n.Proc.Restart()
	if err := t.waitUp(n.Proc.Exited(), n.DirectURL()+"/_health"); err != nil {
		t.anomaly("restart", n.Name, fmt.Sprintf("%s did not come back: %v", n.Name, err), n.Proc.Log())
	}
	n.down = false
	if f != nil {
		t.h.End(f)
	}
}

// KillRouter kills r with SIGKILL.
func (t *Topo) KillRouter(r *Router) *Fault {
	f := t.h.Begin("kill", r.Name, "SIGKILL")
	r.Proc.Kill()
	r.down.Store(true)
	return f
}

// StartRouter starts a killed router again and waits for it.
func (t *Topo) StartRouter(r *Router, f *Fault) {
	if !r.down.Load() {
		return
	}
	r.Proc.Restart()
	if err := t.waitUp(r.Proc.Exited(), r.URL()+"/_health"); err != nil {
		t.anomaly("restart", r.Name, fmt.Sprintf("%s did not come back: %v", r.Name, err), r.Proc.Log())
	}
	r.down.Store(false)
	if f != nil {
		t.h.End(f)
	}
}

// waitUp polls url until it answers 200, the process exits, or a minute
// passes.
func (t *Topo) waitUp(exited <-chan struct{}, url string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("it exited")
		default:
		}
		if res, err := hc.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("no answer within a minute")
}

// Cut cuts the link by which who (a router's name, or peersLink: every
// other node) reaches n; every other link of n stays up.
func (t *Topo) Cut(n *Node, who string) *Fault {
	f := t.h.Begin("cut", who+"->"+n.Name, "")
	n.links[who].Cut()
	return f
}

// Heal ends a Cut.
func (t *Topo) Heal(n *Node, who string, f *Fault) {
	n.links[who].Heal()
	t.h.End(f)
}

// CutDirectory cuts r (a standby) off its directory.
func (t *Topo) CutDirectory(r *Router) *Fault {
	f := t.h.Begin("cut", r.Name+"->directory", "")
	r.dirLink.Cut()
	return f
}

// HealDirectory ends a CutDirectory.
func (t *Topo) HealDirectory(r *Router, f *Fault) {
	r.dirLink.Heal()
	t.h.End(f)
}

// CutGlobal cuts r (a region's router) off the global directory.
func (t *Topo) CutGlobal(r *Router) *Fault {
	f := t.h.Begin("cut", r.Name+"->global directory", "")
	r.globalLink.Cut()
	return f
}

// HealGlobal ends a CutGlobal.
func (t *Topo) HealGlobal(r *Router, f *Fault) {
	r.globalLink.Heal()
	t.h.End(f)
}

// MoveClock jumps n's lease clock by jump (ahead; back holds it still)
// and slews it by slew parts per million from now on.
func (t *Topo) MoveClock(n *Node, jump time.Duration, slew int64) *Fault {
	n.version++
	f := t.h.Begin("clock", n.Name, fmt.Sprintf("jump %v, slew %+d ppm", jump, slew))
	if err := nemesis.WriteClock(n.clock, nemesis.Setting{Version: n.version, Jump: jump, SlewPPM: slew}); err != nil {
		t.tb.Fatalf("move %s's clock: %v", n.Name, err)
	}
	return f
}

// StopSlew ends a MoveClock: the clock keeps the jumps it took and runs
// at its base's rate again.
func (t *Topo) StopSlew(n *Node, f *Fault) {
	n.version++
	if err := nemesis.WriteClock(n.clock, nemesis.Setting{Version: n.version}); err != nil {
		t.tb.Fatalf("move %s's clock: %v", n.Name, err)
	}
	t.h.End(f)
}

// PowerLoss cuts the power of nodes at once: each is killed, every byte
// of its tenant files past the last fsync is dropped (and a torn write
// left in its place, half the time), and it is started again.
func (t *Topo) PowerLoss(rng *rand.Rand, nodes ...*Node) {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	f := t.h.Begin("power loss", strings.Join(names, ","), "")
	for _, n := range nodes {
		if n.paused {
			n.Proc.Continue()
			n.paused = false
		}
		n.Proc.Kill()
		n.down = true
		t.h.LostPower(n.Name)
	}
	for _, n := range nodes {
		files, _ := filepath.Glob(filepath.Join(n.DataDir, "*.fenec"))
		for _, path := range files {
			var garbage []byte
			if rng.IntN(2) == 0 {
				garbage = make([]byte, 1+rng.IntN(200))
				for i := range garbage {
					garbage[i] = byte(rng.IntN(256))
				}
			}
			cut, err := nemesis.LoseUnsynced(n.synced, path, garbage)
			switch {
			case errors.Is(err, nemesis.ErrNeverSynced), errors.Is(err, os.ErrNotExist):
			case err != nil:
				t.tb.Fatalf("power loss of %s: %v", path, err)
			case cut > 0 || len(garbage) > 0:
				t.h.Note("power loss: %s lost %d unsynced bytes, %d of garbage after", filepath.Base(path), cut, len(garbage))
			}
		}
	}
	for _, n := range nodes {
		t.StartNode(n, nil)
	}
	t.h.End(f)
}

// Damage damages tenant's file on n — a copy's, by the scenarios'
// choice — while n is down: a bit flipped past the header, or the tail
// cut off; then starts n again.
func (t *Topo) Damage(rng *rand.Rand, n *Node, tenant string) {
	path := filepath.Join(n.DataDir, tenant+".fenec")
	how := "flip"
	if rng.IntN(2) == 0 {
		how = "cut"
	}
	f := t.h.Begin("damage", n.Name+"/"+tenant, how)
	n.Proc.Kill()
	n.down = true
	st, err := os.Stat(path)
	if err != nil {
		t.h.Note("damage: %s has no %s: %v", n.Name, tenant, err)
		t.StartNode(n, f)
		return
	}
	const header = 64 // past the file's header, so it is the records that are damaged
	size := st.Size()
	switch {
	case size <= header+1:
	case how == "flip":
		off := header + rng.Int64N(size-header)
		b, err := os.ReadFile(path)
		if err != nil {
			t.tb.Fatal(err)
		}
		b[off] ^= 1 << rng.IntN(8)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.tb.Fatal(err)
		}
		f.Detail = fmt.Sprintf("bit flipped at %d of %d", off, size)
	default:
		cut := 1 + rng.Int64N(min(size-header, 4096))
		if err := os.Truncate(path, size-cut); err != nil {
			t.tb.Fatal(err)
		}
		f.Detail = fmt.Sprintf("%d bytes cut off the end of %d", cut, size)
	}
	t.h.DamagedCopy(tenant, n.Name)
	t.h.Note("damaged %s's copy on %s: %s", tenant, n.Name, f.Detail)
	t.StartNode(n, f)
}

// HealAll ends every fault: paused processes continue, killed ones
// start, every link heals, every clock stops slewing.
func (t *Topo) HealAll() {
	for _, n := range t.Nodes {
		if n.paused {
			n.Proc.Continue()
			n.paused = false
		}
		for _, p := range n.links {
			p.Heal()
		}
		if n.version > 0 {
			n.version++
			if err := nemesis.WriteClock(n.clock, nemesis.Setting{Version: n.version}); err != nil {
				t.tb.Fatal(err)
			}
		}
	}
	for _, r := range t.Routers {
		if r.dirLink != nil {
			r.dirLink.Heal()
		}
		if r.globalLink != nil {
			r.globalLink.Heal()
		}
	}
	for _, p := range t.farLinks {
		p.SetDelay(farDelay)
	}
	for _, r := range t.Routers {
		t.StartRouter(r, nil)
	}
	for _, n := range t.Nodes {
		t.StartNode(n, nil)
	}
	t.h.mu.Lock()
	for _, f := range t.h.Faults {
		if f.End == 0 {
			f.End = t.h.Now()
		}
	}
	t.h.mu.Unlock()
}

// anomaly records something the deployment did that no check of the
// history sees: a process that would not start, a handoff that never
// ended.
func (t *Topo) anomaly(check, target, what, log string) {
	a := Anomaly{Check: check, Tenant: target, What: what}
	if log != "" {
		lines := strings.Split(strings.TrimSpace(log), "\n")
		a.Excerpt = lines[max(0, len(lines)-20):]
	}
	t.mu.Lock()
	t.anomalies = append(t.anomalies, a)
	t.mu.Unlock()
}

// Anomalies are what anomaly recorded.
func (t *Topo) Anomalies() []Anomaly {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Anomaly(nil), t.anomalies...)
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
