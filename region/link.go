package region

import (
	"context"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/link"
)

// A region's leading router started with --global links its region's
// directory to the global one (DESIGN.md §7, docs/regions.md): package
// region/link, wired here over the router's directory, lead, leasing,
// audit log and clock. While the global tier leases the region, the link
// copies the region's records down into its own directory, which the
// region's routers forward from: they go on forwarding, and see failovers
// the global tier makes, while the global directory cannot be reached;
// changes are refused there, naming the global tier (ErrMirrored). While
// the region leases its own nodes, its directory is written first and the
// link copies the region's records up into the global directory. Either
// way it keeps the region record of both directories in line and drives
// the region's side of a handoff (handoff.go says the whole).

// wireLink builds a region's router's link to the global directory,
// registers its series and starts it; Close stops it.
func (rt *Router) wireLink() error {
	// The global directory, its node records' tokens sealed under the
	// routers' key.
	open := func(ctx context.Context) (global.Directory, error) {
		if rt.cfg.Global != nil {
			return rt.trust.Seal(unclosed{rt.cfg.Global}), nil
		}
		d, err := global.OpenEtcd(ctx, rt.cfg.GlobalURLs, rt.cfg.Prefix, rt.trust.EtcdOptions(rt.cfg.GlobalURLs)...)
		if err != nil {
			return nil, err
		}
		return rt.trust.Seal(d), nil
	}
	rt.link = link.New(link.Deps{
		ID:           rt.id,
		Region:       rt.cfg.Region,
		Own:          rt.cfg.AutoFailover,
		OfferWait:    offerWait,
		Dir:          rt.dir,
		Open:         open,
		Lead:         rt.lead,
		Leasing:      rt.leasing,
		Settle:       rt.settleTo,
		AuditRegion:  rt.auditRegion,
		AuditControl: func(what, detail string) { rt.auditControl(what, "", detail) },
		Clock:        rt.clock,
		Now:          rt.now,
		Log:          rt.log,
	})
	if err := rt.link.Register(rt.reg); err != nil {
		return err
	}
	rt.wg.Go(func() { rt.link.Run(rt.ctx) })
	return nil
}

// unclosed is a directory the router does not own: its Close does
// nothing.
type unclosed struct{ global.Directory }

func (unclosed) Close() error { return nil }

// mirroring says whether the router is a region's linked to the global
// directory.

// ownsOwnRegion says whether a region's router owns its region's
// placements now (its region leases its nodes), by its view, or why not.
func (rt *Router) ownsOwnRegion() error {
	v := rt.watcher.View()
	if v == nil {
		return ErrNotReady
	}
	return rt.sides.owns(v.RegionRecord(rt.cfg.Region))
}
