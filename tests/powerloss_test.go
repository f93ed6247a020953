package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
	"github.com/fenec-go/fenec/wire"
)

// written is what a write's answer said: its seq, history and id.
type written struct {
	seq     uint64
	history string
	id      int64
}

func insertRow(t *testing.T, c *cluster.Client, k int) written {
	t.Helper()
	res := c.MustQuery("a", "insert c {k: $1}", k)
	var body struct {
		IDs []int64 `json:"ids"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil || len(body.IDs) != 1 {
		t.Fatalf("insert: %s", res)
	}
	seq, err := strconv.ParseUint(res.Header.Get(wire.HeaderSeq), 10, 64)
	if err != nil || res.Header.Get(wire.HeaderHistory) == "" {
		t.Fatalf("insert: no seq or history: %s", res)
	}
	return written{seq: seq, history: res.Header.Get(wire.HeaderHistory), id: body.IDs[0]}
}

// A node under --sync 100 loses power: the process is killed (SIGKILL)
// and its tenant file cut to what was synced, taking two writes it had
// acknowledged. Started again, the file goes on in a new history at a seq
// past theirs: a read sent with Fenec-After and Fenec-History to see a
// lost write is refused (504) rather than answered by the write that
// would otherwise have taken its seq, a change cursor at it is 410, and
// no seq nor id of theirs is given to a new write.
func TestPowerLossForksPastLostWrites(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{})
	n := c.StartNode("n1", cluster.NodeOptions{Args: []string{"--sync", "100"}})
	r.Register(n)
	r.Place("a", n)
	cl := r.Client()
	cl.MustQuery("a", "create collection c (k int)")
	var kept written
	for k := range 3 {
		kept = insertRow(t, cl, k)
	}
	admin := n.Admin()
	cluster.Eventually(t, 10*time.Second, func() error {
		var st struct {
			Durable uint64 `json:"durable"`
		}
		res := admin.Do("GET", "/_admin/tenants/a/replication", nil)
		if err := json.Unmarshal(res.Body, &st); err != nil || st.Durable < kept.seq {
			return fmt.Errorf("durable %d, want %d (%s)", st.Durable, kept.seq, res)
		}
		return nil
	})
	path := filepath.Join(n.DataDir, "a.fenec")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	synced := st.Size()
	lost := []written{insertRow(t, cl, 10), insertRow(t, cl, 11)}

	n.Kill()
	if st, err := os.Stat(path); err != nil || st.Size() <= synced {
		t.Fatalf("the lost writes are not in the file past %d bytes: %v", synced, err)
	}
	if err := os.Truncate(path, synced); err != nil {
		t.Fatal(err)
	}
	n.Restart()

	after := insertRow(t, cl, 12)
	last := lost[len(lost)-1]
	if after.history == kept.history || after.seq <= last.seq || after.id <= last.id {
		t.Fatalf("a write after the loss: seq %d, history %s, id %d; the lost ones went to seq %d, id %d in history %s",
			after.seq, after.history, after.id, last.seq, last.id, kept.history)
	}
	for _, w := range lost {
		res := cl.Do("POST", "/t/a/query", map[string]any{"query": "get c count"},
			wire.HeaderAfter, strconv.FormatUint(w.seq, 10), wire.HeaderHistory, w.history, wire.HeaderWait, "2000")
		wantError(t, res, 504, fmt.Sprintf("a read after lost write %d of history %s", w.seq, w.history))
		wantStatus(t, cl.Do("GET", "/t/a/_changes?since="+strconv.FormatUint(w.seq, 10), nil), 410,
			fmt.Sprintf("a change cursor at lost write %d", w.seq))
	}
	res := cl.Do("POST", "/t/a/query", map[string]any{"query": "get c count"},
		wire.HeaderAfter, strconv.FormatUint(kept.seq, 10), wire.HeaderHistory, kept.history)
	wantStatus(t, res, 200, "a read after a write the loss kept")
	if got := string(res.Body); got != `{"count":4}`+"\n" && got != `{"count":4}` {
		t.Fatalf("rows after the loss: %s", got)
	}
}
