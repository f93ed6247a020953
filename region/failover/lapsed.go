package failover

import (
	"fmt"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/forward"
)

// A node lost (DESIGN.md §10, docs/regions.md "A region lost whole"):
// once the leasing fails a node over because its lease certainly lapsed,
// it records the node lapsed (global.Node.Lapsed; region/leasing's
// lapsed.go), and clears the mark once the node answers its grants again
// (recording the node again clears it too: it answered its admin token).
// While the mark stands, every router answers the tenants that failover
// left on the node — those that survive their zone only and had no copy
// outside it, or whose failover did not complete — 503 at once, naming
// the tenant, the node, its region and since when, rather than sending
// them to a node gone to wait out the dial or the upstream timeout. Their
// read copies go on answering reads that state a bound.

// Unavailable is tenant name's unavailability, as the view v shows it,
// for the forwarder's placement of t on node n: nil unless n is recorded
// lapsed and no failover holds the tenant (one under way is waited for,
// as any other).
func Unavailable(v *global.View, name string, t global.Tenant, n global.Node) *forward.Unavailable {
	if n.Lapsed.IsZero() || t.HeldBy == global.HoldFailover {
		return nil
	}
	u := &forward.Unavailable{Reason: forward.UnavailableZone, Tenant: name, Node: t.Node, Region: n.Region, Since: n.Lapsed}
	var b strings.Builder
	fmt.Fprintf(&b, "tenant %s is unavailable: its node %s of region %s stopped answering and its lease lapsed at %s",
		name, t.Node, n.Region, n.Lapsed.UTC().Format(time.RFC3339))
	if regionLapsed(v, n.Region) {
		fmt.Fprintf(&b, " (every node of region %s has lapsed: the region is lost)", n.Region)
	}
	if t.Survive == global.SurviveRegion {
		u.Reason = forward.UnavailableNotFailedOver
		fmt.Fprintf(&b, ", and its failover to its copy on %s did not complete (the leading router's log says why): fail it over with POST /_shard/nodes/%s/failover ({\"force\": true} promotes a copy that fell behind), or wait for %s to come back",
			t.Replica, t.Node, t.Node)
	} else {
		fmt.Fprintf(&b, "; it survives its zone only (\"survive\": \"zone\"), so no copy outside %s can take its writes", n.Region)
		if t.Replica != "" {
			fmt.Fprintf(&b, " (its copy on %s could not be promoted: POST /_shard/nodes/%s/failover tries again)", t.Replica, t.Node)
		}
		fmt.Fprintf(&b, ": it comes back when %s does; retry after Retry-After", t.Node)
	}
	if copies := t.ReadCopies.Names(); len(copies) > 0 {
		fmt.Fprintf(&b, ". Reads that state Fenec-Max-Staleness or Fenec-After are answered meanwhile by its read copies (on %s), through a router near them (fenec-shard --near), as far as their bounds allow",
			strings.Join(copies, ", "))
	} else {
		b.WriteString(". It has no read copy to answer reads meanwhile")
	}
	if t.Survive != global.SurviveRegion {
		fmt.Fprintf(&b, ". A tenant that must outlive its region is set to survive it: PUT /_shard/tenants/%s/survive {\"survive\": \"region\"}", name)
	}
	u.Msg = b.String()
	return u
}

// regionLapsed says whether every node of region r is recorded lapsed.
func regionLapsed(v *global.View, r string) bool {
	seen := 0
	for _, n := range v.Nodes() {
		if n.Region != r {
			continue
		}
		if n.Lapsed.IsZero() {
			return false
		}
		seen++
	}
	return seen > 0
}
