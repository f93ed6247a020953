package nemesis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CheckCopies holds every tenant's copy, once the deployment settled, to
// its primary: the copy catches up to the primary's seq and history
// within wait, and then holds the same rows. A copy that holds other
// rows at the same seq diverged: promoted, it would answer what the
// primary never acknowledged, or lack what it did.
//
// A tenant with no copy named is given the same while to get one (the
// router's repair places copies on its own).
func (t *Topo) CheckCopies(wait time.Duration) {
	for _, name := range t.tenants {
		var p Placement
		var last error
		deadline := time.Now().Add(wait)
		for {
			ps, err := t.Placements(context.Background())
			switch {
			case err != nil:
				last = fmt.Errorf("no router lists the tenants: %w", err)
			case ps[name].Replica == "":
				p, last = ps[name], errNoCopy
			default:
				p = ps[name]
				last = t.caughtUp(name, p.Node, p.Replica)
			}
			if last == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if errors.Is(last, errNoCopy) {
			check := "copies"
			if t.moved(name) {
				check = "copy lost to a move"
			}
			t.anomaly(check, name, fmt.Sprintf("%s had no copy %v after the heal: %+v", name, wait, p), "")
			continue
		}
		if p.Replica == "" {
			t.anomaly("copies", name, last.Error(), "")
			continue
		}
		if last != nil && t.damagedHere(name, p.Replica) && strings.Contains(last.Error(), "damaged") {
			t.anomaly("damaged copy kept", name, fmt.Sprintf("the copy on %s, damaged by the suite, is refused and never replaced: %v",
				p.Replica, last), "")
			continue
		}
		if last != nil && t.movedOnto(name, p.Replica) {
			t.anomaly("copy lost to a move", name, fmt.Sprintf("the copy on %s, a move's target, did not catch up within %v: %v; primary %s, copy %s",
				p.Replica, wait, last, t.replicationJSON(p.Node, name), t.replicationJSON(p.Replica, name)), "")
			continue
		}
		if last != nil {
			t.anomaly("copies", name, fmt.Sprintf("the copy did not catch up within %v: %v; primary %s, copy %s",
				wait, last, t.replicationJSON(p.Node, name), t.replicationJSON(p.Replica, name)), "")
			t.stuck[p.Node], t.stuck[p.Replica] = true, true
			continue
		}
		if diff := t.sameRows(name, t.Node(p.Node), t.Node(p.Replica)); diff != "" {
			t.anomaly("copy diverged", name, fmt.Sprintf("the copy on %s holds other rows than the primary on %s at the same seq and history: %s",
				p.Replica, p.Node, diff), "")
		}
	}
}

// sameRows compares what tenant's file holds on two nodes, object by
// object; "" when they agree.
func (t *Topo) sameRows(tenant string, a, b *Node) string {
	reads := []struct {
		what  string
		query string
		param any
	}{
		{"reg", "get reg select v where k = 'r'", nil},
		{"cnt", "get cnt select v where k = 'c'", nil},
	}
	for _, k := range listKeys {
		reads = append(reads, struct {
			what  string
			query string
			param any
		}{"log/" + k, "get log select e where l = $1 order id", k})
	}
	for _, rd := range reads {
		body := map[string]any{"query": rd.query}
		if rd.param != nil {
			body["params"] = []any{rd.param}
		}
		ra := a.admin.Do("POST", "/_admin/tenants/"+tenant+"/read", body)
		rb := b.admin.Do("POST", "/_admin/tenants/"+tenant+"/read", body)
		if ra.Status != 200 || rb.Status != 200 {
			return fmt.Sprintf("%s: could not read both: %s / %s", rd.what, ra, rb)
		}
		if !bytes.Equal(ra.Body, rb.Body) {
			return fmt.Sprintf("%s: %s has %s, %s has %s", rd.what, a.Name, cut(ra.Body), b.Name, cut(rb.Body))
		}
	}
	return ""
}

// cut shortens an answer for a message.
func cut(b []byte) string {
	if len(b) > 300 {
		return string(b[:150]) + " … " + string(b[len(b)-150:])
	}
	return string(b)
}

// replicationJSON is a node's replication status of tenant, as it
// answers it.
func (t *Topo) replicationJSON(node, tenant string) string {
	res := t.Node(node).admin.Do("GET", "/_admin/tenants/"+tenant+"/replication", nil)
	return cut(res.Body)
}

// DumpStuck has every node a check found stuck write its goroutines to
// its log (SIGQUIT), and end.
func (t *Topo) DumpStuck() {
	for _, n := range t.Nodes {
		if t.stuck[n.Name] && !n.down {
			n.Proc.Quit()
			n.down = true
		}
	}
}

// damagedHere says whether the suite damaged tenant's file on node.
func (t *Topo) damagedHere(tenant, node string) bool {
	t.h.mu.Lock()
	defer t.h.mu.Unlock()
	return slices.Contains(t.h.Damaged[tenant], node)
}

// errNoCopy: the directory names no copy of the tenant.
var errNoCopy = errors.New("no copy named")

// moved says whether the suite asked for tenant to move at all.
func (t *Topo) moved(tenant string) bool {
	_, faults := t.h.Snapshot()
	for _, f := range faults {
		if f.Kind == "move" && f.Target == tenant {
			return true
		}
	}
	return false
}

// movedOnto says whether the suite asked for tenant to move onto node.
func (t *Topo) movedOnto(tenant, node string) bool {
	_, faults := t.h.Snapshot()
	for _, f := range faults {
		if f.Kind == "move" && f.Target == tenant && strings.HasSuffix(f.Detail, " to "+node) {
			return true
		}
	}
	return false
}
