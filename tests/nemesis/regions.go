package nemesis

import (
	"encoding/json"
	"fmt"
	"time"
)

// regionRecord is eu's row of GET /_shard/regions.
type regionRecord struct {
	Name    string  `json:"name"`
	Leaser  string  `json:"leaser"`
	Epoch   float64 `json:"epoch"`
	Handoff *struct {
		State string `json:"state"`
		To    string `json:"to"`
		Why   string `json:"why"`
	} `json:"handoff"`
}

// region reads eu's record at r.
func (t *Topo) region(r *Router) (regionRecord, error) {
	res := r.cl.Do("GET", "/_shard/regions", nil)
	var regs []regionRecord
	if res.Status != 200 || json.Unmarshal(res.Body, &regs) != nil {
		return regionRecord{}, fmt.Errorf("regions at %s: %s", r.Name, res)
	}
	for _, reg := range regs {
		if reg.Name == region {
			return reg, nil
		}
	}
	return regionRecord{}, fmt.Errorf("no region %s at %s", region, r.Name)
}

// regionSettled: eu's handoff is not in flight, both directories say the
// same of who leases eu, every node is bound to that directory at that
// epoch, and the other side leases none of them.
func (t *Topo) regionSettled() error {
	g, e := t.Routers[0], t.Routers[2]
	reg, err := t.region(g)
	if err != nil {
		return err
	}
	if reg.Handoff != nil && reg.Handoff.State != "done" && reg.Handoff.State != "rolled_back" {
		return fmt.Errorf("eu's handoff still %s", reg.Handoff.State)
	}
	mine, err := t.region(e)
	if err != nil {
		return err
	}
	if mine.Leaser != reg.Leaser || mine.Epoch != reg.Epoch {
		return fmt.Errorf("eu's own record says %s at %v, the global tier's %s at %v", mine.Leaser, mine.Epoch, reg.Leaser, reg.Epoch)
	}
	dir, other := "global", e
	if reg.Leaser == "region" {
		dir, other = "region:"+region, g
	}
	for _, n := range t.Nodes {
		var st struct {
			Dir   string  `json:"dir"`
			Epoch float64 `json:"epoch"`
		}
		res := n.admin.Do("GET", "/_admin/lease", nil)
		if res.Status != 200 || json.Unmarshal(res.Body, &st) != nil {
			return fmt.Errorf("%s's lease: %s", n.Name, res)
		}
		if st.Dir != dir || st.Epoch != reg.Epoch {
			return fmt.Errorf("%s bound to %s at epoch %v; eu's record says %s at %v", n.Name, st.Dir, st.Epoch, dir, reg.Epoch)
		}
	}
	var l leases
	res := other.cl.Do("GET", "/_shard/leases", nil)
	if res.Status != 200 || json.Unmarshal(res.Body, &l) != nil {
		return fmt.Errorf("leases at %s: %s", other.Name, res)
	}
	if l.Leasing && len(l.Nodes) > 0 {
		return fmt.Errorf("%s leases eu's nodes too: %s", other.Name, res.Body)
	}
	return nil
}

// Handoff asks for eu's leasing to go to "region" or "global" (force: a
// forced takeover, on eu's router), waiting at most wait for the answer.
func (t *Topo) Handoff(to string, force bool, wait time.Duration) (int, string) {
	via := t.Routers[0]
	if to == "region" {
		via = t.Routers[2]
	}
	body := map[string]any{"to": to}
	if force {
		// The scenario forces only once it killed the global tier: it
		// knows what the guard would make an operator wait to see.
		body["force"], body["even_if_global_answers"] = true, true
	}
	f := t.h.Begin("handoff", "eu to "+to, fmt.Sprintf("force %v, asked at %s", force, via.Name))
	res := via.cl.Do("POST", fmt.Sprintf("/_shard/regions/%s/handoff?wait=%d", region, int(wait.Seconds())), body)
	t.h.End(f)
	t.h.Note("handoff of eu to %s (force %v) at %s: %s", to, force, via.Name, res)
	return res.Status, string(res.Body)
}

// handoffState is the state of eu's handoff as the first leading router
// that answers reads it ("none" before any, "unknown" if none answers).
func (t *Topo) handoffState() string {
	for _, r := range []*Router{t.Routers[0], t.Routers[2]} {
		if r.down.Load() {
			continue
		}
		if reg, err := t.region(r); err == nil {
			if reg.Handoff == nil {
				return "none"
			}
			return reg.Handoff.State
		}
	}
	return "unknown"
}
