package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/nemesis"
	"github.com/fenec-go/fenec/tests/cluster"
)

// rehome is a deployment of two regions leased by the global tier: eu1 in
// eu and us1 in us (each --lease --sync always, with a replication token),
// and a router g leading the global tier.
type rehome struct {
	g        *cluster.Router
	eu1, us1 *cluster.Node
	admin    *cluster.Client
}

// startRehome starts the deployment; pause, if set, is the step at which
// g holds every move (a fenec-shard built with the tag nemesis, which
// alone reads nemesis.MovePauseEnv).
func startRehome(t *testing.T, pause string) *rehome {
	c := cluster.New(t)
	d := &rehome{}
	o := cluster.RouterOptions{Args: []string{"--auto-failover", "2"}}
	if pause != "" {
		o.Tags, o.Env = "nemesis", []string{nemesis.MovePauseEnv + "=" + pause}
	}
	d.g = c.StartRouter("g", o)
	args := []string{"--lease", "--sync", "always", "--replication-token", replToken}
	d.eu1 = c.StartNode("eu1", cluster.NodeOptions{Args: args})
	d.us1 = c.StartNode("us1", cluster.NodeOptions{Args: args})
	d.admin = d.g.Client()
	for n, region := range map[*cluster.Node]string{d.eu1: "eu", d.us1: "us"} {
		wantStatus(t, d.admin.Do("PUT", "/_shard/nodes/"+n.Name, map[string]any{
			"addr": n.URL(), "token": cluster.AdminToken, "region": region}), 201, "register "+n.Name)
	}
	waitLeased(t, d.g, "eu1", "us1")
	return d
}

// movePlace is a tenant's row in GET /_shard/tenants.
type movePlace struct {
	Node     string `json:"node"`
	State    string `json:"state"`
	Target   string `json:"target"`
	HeldBy   string `json:"held_by"`
	MoveStep string `json:"move_step"`
}

// movePlacement reads tenant's row through admin.
func movePlacement(admin *cluster.Client, tenant string) (movePlace, error) {
	res := admin.Do("GET", "/_shard/tenants", nil)
	var rows []struct {
		Name string `json:"name"`
		movePlace
	}
	if res.Status != 200 || json.Unmarshal(res.Body, &rows) != nil {
		return movePlace{}, fmt.Errorf("tenants: %s", res)
	}
	for _, r := range rows {
		if r.Name == tenant {
			return r.movePlace, nil
		}
	}
	return movePlace{}, fmt.Errorf("no row for %s: %s", tenant, res.Body)
}

// loadBulk puts n documents of about 150 bytes each into tenant's
// collection bulk, in batches.
func loadBulk(t *testing.T, c *cluster.Client, tenant string, n int) {
	t.Helper()
	c.MustQuery(tenant, "create collection bulk (title text, i int)")
	const batch = 2000
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 5)
	for i := 0; i < n; i += batch {
		var b strings.Builder
		b.WriteString("put bulk [")
		for j := i; j < min(i+batch, n); j++ {
			if j > i {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{title: '%s%d', i: %d}", filler, j, j)
		}
		b.WriteString("]")
		c.MustQuery(tenant, b.String())
	}
}

// checkAcked fails t unless every write w acknowledged is on node n once
// (read straight from it), and returns how many rows c holds.
func checkAcked(t *testing.T, w *writer, n *cluster.Node, tenant string) int {
	t.Helper()
	rows := NewDirect(t, n).MustQuery(tenant, "get c select k order k").Rows(t)
	have := map[int]int{}
	for _, row := range rows {
		k, _ := strconv.Atoi(fmt.Sprint(row["k"]))
		have[k]++
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.acked {
		if have[k] != 1 {
			t.Fatalf("%s: acknowledged write k=%d (Fenec-Seq %s) is there %d times", n.Name, k, w.seqs[k], have[k])
		}
	}
	if len(rows) > len(w.acked)+1 {
		t.Fatalf("%s: %d rows for %d acknowledged writes (one may be in flight at the stop)", n.Name, len(rows), len(w.acked))
	}
	return len(rows)
}

// checkRefusals fails t if the writer met a refusal no retry with its
// key settles: a 4xx other than 429.
func checkRefusals(t *testing.T, w *writer) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for st, n := range w.status {
		if st/100 == 4 && st != 429 {
			t.Fatalf("the writer was answered %d %d times (last %v)", st, n, w.last)
		}
	}
}

// onePrimary fails t unless primary holds tenant as a primary taking
// writes and other comes to hold no file of it.
func onePrimary(t *testing.T, tenant string, primary, other *cluster.Node) {
	t.Helper()
	res := primary.Admin().Do("GET", "/_admin/tenants/"+tenant+"/replication", nil)
	var st struct {
		Role   string `json:"role"`
		Frozen bool   `json:"frozen"`
	}
	if res.Status != 200 || json.Unmarshal(res.Body, &st) != nil || st.Role != "primary" || st.Frozen {
		t.Fatalf("%s's file of %s: %s", primary.Name, tenant, res)
	}
	cluster.Eventually(t, wait, func() error {
		if _, err := os.Stat(filepath.Join(other.DataDir, tenant+".fenec")); !os.IsNotExist(err) {
			return fmt.Errorf("%s still has %s.fenec: %v", other.Name, tenant, err)
		}
		return nil
	})
}

// TestRehomeUnderWriter moves a tenant of tens of thousands of documents
// from eu to us while a client writes to it through the router, 200
// writes a second, each with its Idempotency-Key: the target's copy
// followed the source, every acknowledged write is read back on the
// target, the writer met no refusal a retry did not settle, and the
// longest gap between acknowledged writes is logged beside the time the
// whole move took (what a source frozen for the image's copy would have
// paused writes for).
func TestRehomeUnderWriter(t *testing.T) {
	d := startRehome(t, "")
	c := d.g.Client()
	d.g.Place("big", d.eu1)
	c.MustQuery("big", "create collection c (k int @unique)")
	loadBulk(t, c, "big", 30000)

	w := startPacedWriter(t, c, "big", 5*time.Millisecond)
	cluster.Eventually(t, wait, func() error {
		if n := w.count(); n < 100 {
			return fmt.Errorf("%d writes acknowledged before the move", n)
		}
		return nil
	})
	began := time.Now()
	gapBefore, _ := w.longestGap(began.Add(-time.Second), began)
	mv := d.admin.Do("POST", "/_shard/tenants/big/move", map[string]any{"to": "us1"})
	wantStatus(t, mv, 200, "move big to us1")
	var moved struct {
		From, To, By string
		Bytes, MS    int64
		PauseMS      int64 `json:"pause_ms"`
	}
	if err := json.Unmarshal(mv.Body, &moved); err != nil || moved.From != "eu1" || moved.To != "us1" || moved.By != "follow" || moved.Bytes <= 0 {
		t.Fatalf("move answer %s (%v)", mv.Body, err)
	}
	atMove := w.count()
	cluster.Eventually(t, wait, func() error {
		if n := w.count(); n < atMove+100 {
			return fmt.Errorf("%d writes acknowledged after the move, want 100", n-atMove)
		}
		return nil
	})
	w.stop()
	gap, gapEnd := w.longestGap(began, time.Now())
	t.Logf("move of %d bytes took %d ms, the source frozen %d ms; longest gap between acknowledged writes %v (ending %v after the move began; %v in the second before it); %d writes acknowledged; refusals by status %v",
		moved.Bytes, moved.MS, moved.PauseMS, gap, gapEnd.Sub(began).Round(time.Millisecond), gapBefore, w.count(), w.status)
	checkRefusals(t, w)
	checkAcked(t, w, d.us1, "big")
	if got := c.MustQuery("big", "get bulk count").Body; !strings.Contains(string(got), `"count":30000`) {
		t.Fatalf("bulk on the target: %s", got)
	}
	p, err := movePlacement(d.admin, "big")
	if err != nil || p.Node != "us1" || p.State != "active" || p.HeldBy != "" || p.MoveStep != "" {
		t.Fatalf("after the move: %+v (%v)", p, err)
	}
	onePrimary(t, "big", d.us1, d.eu1)
}

// TestRehomeRouterKilledMidMove kills the leading router while a move is
// held at each of its steps (nemesis.MovePauseEnv), under a writer, and
// starts it again: a move held while its copy follows, or with the source
// frozen for the switch, is put back on the source; one whose copy was
// promoted is finished on the target. Either way one node holds the
// tenant as its primary, the other none, and every acknowledged write is
// there. While no router grants, the writer may meet a 500 whose outcome
// is unknown (the node's lease lapsed as the write waited): sent again
// with its key, it is answered as it landed.
func TestRehomeRouterKilledMidMove(t *testing.T) {
	for _, tc := range []struct {
		step string
		onto string // where the tenant is after the restart
	}{
		{step: "following", onto: "eu1"},
		{step: "switching", onto: "eu1"},
		{step: "promoting", onto: "us1"},
	} {
		t.Run(tc.step, func(t *testing.T) {
			d := startRehome(t, tc.step)
			c := d.g.Client()
			d.g.Place("k", d.eu1)
			c.MustQuery("k", "create collection c (k int @unique)")
			loadBulk(t, c, "k", 2000)
			w := startPacedWriter(t, c, "k", 10*time.Millisecond)
			cluster.Eventually(t, wait, func() error {
				if n := w.count(); n < 30 {
					return fmt.Errorf("%d writes acknowledged before the move", n)
				}
				return nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			moveDone := make(chan *cluster.Resp, 1)
			go func() { moveDone <- d.admin.DoCtx(ctx, "POST", "/_shard/tenants/k/move", map[string]any{"to": "us1"}) }()
			cluster.Eventually(t, wait, func() error {
				if !strings.Contains(d.g.Log(), "move paused for a test") {
					return fmt.Errorf("the move has not reached %s", tc.step)
				}
				return nil
			})
			if p, err := movePlacement(d.admin, "k"); err != nil || p.MoveStep != tc.step || p.State != "moving" {
				t.Fatalf("held at %s: %+v (%v)", tc.step, p, err)
			}
			d.g.Kill()
			if res := <-moveDone; res.Status == 200 {
				t.Fatalf("the move answered although its router was killed: %s", res)
			}
			killedAt := w.count()
			d.g.Restart()
			cluster.Eventually(t, wait, func() error {
				p, err := movePlacement(d.admin, "k")
				if err != nil {
					return err
				}
				if p.Node != tc.onto || p.State != "active" || p.HeldBy != "" || p.MoveStep != "" || p.Target != "" {
					return fmt.Errorf("after the restart: %+v", p)
				}
				return nil
			})
			cluster.Eventually(t, wait, func() error {
				if n := w.count(); n < killedAt+50 {
					return fmt.Errorf("%d writes acknowledged since the router was killed, want 50", n-killedAt)
				}
				return nil
			})
			w.stop()
			t.Logf("%d writes acknowledged, %d before the kill; refusals by status %v, the first of each %v", w.count(), killedAt, w.status, w.first)
			checkRefusals(t, w)
			primary, other := d.eu1, d.us1
			if tc.onto == "us1" {
				primary, other = d.us1, d.eu1
			}
			checkAcked(t, w, primary, "k")
			onePrimary(t, "k", primary, other)
		})
	}
}

// TestRehomeSourceRestartedMidSwitch restarts a move's source while the
// move is held with the source frozen (switching) or its copy promoted
// (promoting), its router alive and leasing: the source, its freeze
// forgotten, is granted its other tenants but not the moving one, so it
// takes none of its writes — straight or through the router — however
// long it runs so. The router killed and started again then puts a
// switching move back and finishes a promoting one on the target (the
// source holds nothing past the recorded seq): one primary, every
// acknowledged write there.
func TestRehomeSourceRestartedMidSwitch(t *testing.T) {
	for _, tc := range []struct {
		step string
		onto string
	}{
		{step: "switching", onto: "eu1"},
		{step: "promoting", onto: "us1"},
	} {
		t.Run(tc.step, func(t *testing.T) {
			d := startRehome(t, tc.step)
			c := d.g.Client()
			d.g.Place("k", d.eu1)
			d.g.Place("other", d.eu1)
			c.MustQuery("k", "create collection c (k int @unique)")
			c.MustQuery("other", "create collection c (k int)")
			w := startPacedWriter(t, c, "k", 10*time.Millisecond)
			cluster.Eventually(t, wait, func() error {
				if n := w.count(); n < 30 {
					return fmt.Errorf("%d writes acknowledged before the move", n)
				}
				return nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			moveDone := make(chan *cluster.Resp, 1)
			go func() { moveDone <- d.admin.DoCtx(ctx, "POST", "/_shard/tenants/k/move", map[string]any{"to": "us1"}) }()
			cluster.Eventually(t, wait, func() error {
				if !strings.Contains(d.g.Log(), "move paused for a test") {
					return fmt.Errorf("the move has not reached %s", tc.step)
				}
				return nil
			})
			if p, err := movePlacement(d.admin, "k"); err != nil || p.MoveStep != tc.step {
				t.Fatalf("held at %s: %+v (%v)", tc.step, p, err)
			}
			paused := w.count()

			d.eu1.Kill()
			d.eu1.Restart()
			direct := NewDirect(t, d.eu1)
			i := 0
			cluster.Eventually(t, wait, func() error {
				i++
				if r := direct.Do("POST", "/t/other/c", fmt.Sprintf(`{"k": %d}`, i)); r.Status != 201 {
					return fmt.Errorf("eu1 started again takes no write to its other tenant yet: %s", r)
				}
				return nil
			})
			// Granted again, by a list that leaves k out.
			r := direct.Do("POST", "/t/k/c", `{"k": -1}`)
			if r.Status != 503 || r.Header.Get("Fenec-Refused") != "lease" {
				t.Fatalf("eu1 started again %s: a write to k straight to it: %s", tc.step, r)
			}
			if st := replicationOf(t, d.eu1, "k"); st.Frozen {
				t.Fatalf("eu1 started again still frozen: its freeze is not what refuses")
			}
			if n := w.count(); n != paused {
				t.Fatalf("%d writes to k acknowledged while the move was held at %s with its source started again", n-paused, tc.step)
			}

			d.g.Kill()
			if res := <-moveDone; res.Status == 200 {
				t.Fatalf("the move answered although its router was killed: %s", res)
			}
			d.g.Restart()
			cluster.Eventually(t, wait, func() error {
				p, err := movePlacement(d.admin, "k")
				if err != nil {
					return err
				}
				if p.Node != tc.onto || p.State != "active" || p.HeldBy != "" || p.MoveStep != "" || p.Target != "" {
					return fmt.Errorf("after the restart: %+v", p)
				}
				return nil
			})
			cluster.Eventually(t, wait, func() error {
				if n := w.count(); n < paused+30 {
					return fmt.Errorf("%d writes acknowledged since the move was held, want 30", n-paused)
				}
				return nil
			})
			w.stop()
			t.Logf("%d writes acknowledged, %d before the hold; refusals by status %v", w.count(), paused, w.status)
			checkRefusals(t, w)
			primary, other := d.eu1, d.us1
			if tc.onto == "us1" {
				primary, other = d.us1, d.eu1
			}
			checkAcked(t, w, primary, "k")
			onePrimary(t, "k", primary, other)
		})
	}
}

// replicationOf is tenant's replication status on n, straight from it.
func replicationOf(t *testing.T, n *cluster.Node, tenant string) struct {
	Role   string `json:"role"`
	Frozen bool   `json:"frozen"`
	Seq    uint64 `json:"seq"`
} {
	t.Helper()
	var st struct {
		Role   string `json:"role"`
		Frozen bool   `json:"frozen"`
		Seq    uint64 `json:"seq"`
	}
	res := n.Admin().Do("GET", "/_admin/tenants/"+tenant+"/replication", nil)
	if res.Status != 200 || json.Unmarshal(res.Body, &st) != nil {
		t.Fatalf("%s's replication of %s: %s", n.Name, tenant, res)
	}
	return st
}
