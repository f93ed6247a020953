package region

import (
	"context"
	"errors"
	"fmt"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/wire"
)

// The side that leases a region owns its placements (docs/regions.md):
// the global tier's leading router takes changes for the tenants and nodes
// of regions the global tier leases, a region's leading router for its
// region's while the region leases. Every change checks the region record
// in the directory it writes, and writes through a store guarded on that
// record's revision, so a handoff that moves the record on makes the
// change fail rather than land on the side that no longer owns the region.

var (
	// ErrNotOwner: a change for a region this router's side does not own
	// (409, naming where to send it).
	ErrNotOwner = errors.New("this router's side does not own the region's placements")
	// ErrHandingOver: the region's leasing is being handed over (503):
	// neither side takes its changes until the handoff is done.
	ErrHandingOver = errors.New("the region's leasing is being handed over")
	// ErrFarTenant: a change for a far tenant sent to a region's router
	// (409): the tenant is homed in another region, and its placement
	// changes at the global tier's leading router.
	ErrFarTenant = errors.New("this region's routers serve the tenant from a read-only copy of its record and do not place it: its placement changes at the global tier's leading router; send the change there")
)

// ownerError says which side owns region and where to send its changes.
type ownerError struct {
	region string
	rec    global.Region
	// regional: the refusing router is a region's (else the global tier's).
	regional bool
	// serves: the region a regional router serves (when region differs).
	serves string
}

func (e *ownerError) Error() string {
	switch {
	case e.rec.LeasedBy() == "":
		return fmt.Sprintf("region %s's leasing is being handed over (to %s, %s): its changes are taken again once it is done; send it again in a moment",
			e.region, e.rec.Handoff.To, e.rec.Handoff.State)
	case e.regional && e.serves != e.region:
		return fmt.Sprintf("this router serves region %s only: send changes for region %s to the global tier's leading router", e.serves, e.region)
	case e.regional:
		return fmt.Sprintf("region %s: %v", e.region, ErrMirrored)
	}
	where := "its leading router (fenec-shard --region " + e.region + ")"
	if e.rec.Router != "" {
		where = "its leading router, " + e.rec.Router
	}
	return fmt.Sprintf("region %s leases its own nodes and owns its placements: send this change to %s", e.region, where)
}

func (e *ownerError) Is(target error) bool {
	if e.rec.LeasedBy() == "" {
		return target == ErrHandingOver
	}
	return target == ErrNotOwner || e.regional && target == ErrMirrored
}

// sides is which side this router leases and owns for — the global tier,
// or its region — and the checks every change makes against it. The
// Router holds one (Router.sides), built as it is made; view and term
// read the watcher and the lead once the router has wired them.
type sides struct {
	// regional: a region's router (--global: it mirrors the global
	// directory's records of its region), serving region (--region).
	regional bool
	region   string
	view     func() *global.View // nil until the router's directory is read
	term     func() uint64       // the lead's term as this router sees it
}

// mirroring says whether this is a region's router.
func (o sides) mirroring() bool { return o.regional }

// side is the side this router leases and owns for: the global tier, or
// its region.
func (o sides) side() string {
	if o.regional {
		return global.LeaserRegion
	}
	return global.LeaserGlobal
}

// dirName names the router's directory in grants and in meta/name.
func (o sides) dirName() string {
	if o.regional {
		return global.DirOfRegion(o.region)
	}
	return global.DirGlobal
}

// leasedRegion is the region a region's router leases ("" on the global
// tier's).
func (o sides) leasedRegion() string {
	if o.regional {
		return o.region
	}
	return ""
}

// owns says whether this router's side owns the region rec records, or why
// not.
func (o sides) owns(rec global.Region) error {
	e := &ownerError{region: rec.Name, rec: rec, regional: o.regional, serves: o.region}
	if o.regional && rec.Name != o.region {
		return e
	}
	if rec.LeasedBy() == o.side() {
		return nil
	}
	return e
}

// own checks, in the directory s writes, that this router's side owns
// region r, and returns s guarded on r's record as it read it.
func (o sides) own(ctx context.Context, s *global.Store, r string) (*global.Store, error) {
	if err := global.CheckName("region", r); err != nil {
		return nil, err
	}
	at, err := s.ReadRegion(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("read region %s: %w", r, err)
	}
	if err := o.owns(at.Value); err != nil {
		return nil, err
	}
	return s.Guarded(global.IfModRev(global.RegionKey(r), at.Rev)), nil
}

// ownNode is own for node n's region; a node not recorded leaves s as it
// is (the change then finds it unknown).
func (o sides) ownNode(ctx context.Context, s *global.Store, n string) (*global.Store, error) {
	if n == "" || !global.ValidName(n) {
		return s, nil
	}
	node, err := s.GetNode(ctx, n)
	if isNotFound(err) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	return o.own(ctx, s, node.Value.Region)
}

// ownTenant is own for tenant t's region (its node's); a tenant not
// recorded leaves s as it is.
func (o sides) ownTenant(ctx context.Context, s *global.Store, t string) (*global.Store, error) {
	if t == "" || !global.ValidName(t) {
		return s, nil
	}
	rec, err := s.GetTenant(ctx, t)
	if isNotFound(err) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	return o.ownNode(ctx, s, rec.Value.Node)
}

// refuseFar refuses a change of tenant t on a region's router whose view
// holds t as a far tenant (global.Far): one homed in another region, with
// a copy in this one. Its placement is never this region's to change.
func (o sides) refuseFar(t string) error {
	v := o.viewNow()
	if t == "" || v == nil {
		return nil
	}
	if _, own := v.Tenant(t); own {
		return nil
	}
	rec, ok := v.FarTenant(t)
	if !ok {
		return nil
	}
	home := "another region"
	if n, ok := v.FarNode(rec.Node); ok {
		home = "region " + n.Region
	}
	return fmt.Errorf("tenant %s is homed in %s (its primary on %s), with a copy in region %s: %w", t, home, rec.Node, o.region, ErrFarTenant)
}

// promoteFence names this router's directory, region r's leasing epoch
// and the router's term in a promotion it asks of a node of r: a node
// leased by another directory, or at a later epoch or term, refuses it.
func (o sides) promoteFence(r string) wire.Promote {
	f := wire.Promote{Dir: o.dirName(), Term: o.term()}
	if v := o.viewNow(); v != nil {
		f.Epoch = v.RegionRecord(r).Epoch
	}
	return f
}

// ownedIn says, from view v, whether this router's side owns region r
// (for the jobs that pick what to work on; each change they make still
// checks with own).
func (o sides) ownedIn(v *global.View, r string) bool {
	return v != nil && o.owns(v.RegionRecord(r)) == nil
}

// viewNow is the router's view, nil before its directory is read.
func (o sides) viewNow() *global.View {
	if o.view == nil {
		return nil
	}
	return o.view()
}
