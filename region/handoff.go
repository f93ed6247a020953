package region

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/copies"
)

// The handoff of a region's leasing (docs/regions.md): the states live in
// the region record of the global directory, each step a compare-and-swap
// there (global/handoff.go). The global tier's leading router takes its
// steps from its view of the global directory (globalHandoffs,
// handoff_global.go); a region's leading router from its link (package
// region/link, wired in link.go), which reads both directories and keeps
// the region's own record in line with the global one. The rules both
// sides share are global's (Region.Equal, Handoff.Unanswered, GiveBound).
// This file holds the route: POST /_shard/regions/<r>/handoff asks for
// one, on either router, and waits for it to end; with force, on the
// region's router, the forced takeover.

// handoffWait bounds how long POST .../handoff waits for the handoff to
// end before answering 202 with where it stands; globalCallWait bounds a
// region's router's offer written into the global directory.
const (
	handoffWait    = 30 * time.Second
	globalCallWait = 3 * time.Second
)

// forceGuard is how long after the global directory last answered the
// region's link a forced takeover is refused (409) unless asked with
// "even_if_global_answers": a global tier that answers takes a planned
// handoff, which fences nobody by surprise.
const forceGuard = 10 * time.Second

// answeredAgo says, for the audit log, when the global directory last
// answered.
func answeredAgo(within bool, ago time.Duration) string {
	if ago == 0 && !within {
		return "never since this router led"
	}
	return fmt.Sprintf("%.1f s ago", ago.Seconds())
}

// offerWait bounds how long an offer waits for its taker's ready
// (global.OfferWait; the route's answer to an offer taken back is a
// refusal that says what to start). A variable for the tests alone: a
// router reads it as it starts.
var offerWait = global.OfferWait

// handoffAnswer is what POST .../handoff answers: the region record.
type handoffAnswer struct {
	Region  string          `json:"region"`
	Leaser  string          `json:"leaser"`
	Epoch   uint64          `json:"epoch"`
	State   string          `json:"state"`
	Handoff *global.Handoff `json:"handoff,omitempty"`
}

func answerOf(r global.Region) handoffAnswer {
	return handoffAnswer{Region: r.Name, Leaser: r.Leaser, Epoch: r.Epoch, State: r.HandoffState(), Handoff: r.Handoff}
}

// postHandoff serves POST /_shard/regions/<r>/handoff {"to", "force"}
// [?wait=S]: on the global tier's leading router or region r's, a planned
// handoff offered in the global directory and waited for (S seconds,
// handoffWait at most and by default); on region r's, with force, the
// forced takeover.
func (c *shardCall) postHandoff(s *global.Store, region string) (int, any, error) {
	if err := global.CheckName("region", region); err != nil {
		return 0, nil, err
	}
	wait, err := handoffWaitOf(c.r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	var req struct {
		To    string `json:"to"`
		Force bool   `json:"force"`
		// EvenIfGlobalAnswers forces a takeover although the global
		// directory answered within forceGuard.
		EvenIfGlobalAnswers bool `json:"even_if_global_answers"`
	}
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if req.To != global.LeaserGlobal && req.To != global.LeaserRegion {
		return 0, nil, fmt.Errorf("%w: \"to\" is \"global\" or \"region\"", ErrBadRequest)
	}
	rt := c.rt
	if rt.sides.mirroring() && region != rt.cfg.Region {
		return 0, nil, fmt.Errorf("%w: this router serves region %s; send the handoff of region %s to the global tier's leading router or to that region's", ErrNotOwner, rt.cfg.Region, region)
	}
	if req.EvenIfGlobalAnswers && !req.Force {
		return 0, nil, fmt.Errorf("%w: \"even_if_global_answers\" goes with \"force\": true only", ErrBadRequest)
	}
	if req.Force {
		if req.To == global.LeaserRegion {
			// The region's own copy of its records says which of its
			// tenants must survive it: the global one may be out of reach.
			if err := copies.RefuseRegionalLeasing(c.r.Context(), s, region); err != nil {
				return 0, nil, err
			}
		}
		return c.forceTakeover(s, region, req.To, req.EvenIfGlobalAnswers)
	}
	if rt.sides.mirroring() && req.To == global.LeaserRegion && rt.cfg.AutoFailover <= 0 {
		return 0, nil, fmt.Errorf("%w: this router runs without --auto-failover: it cannot lease region %s's nodes; restart it with --auto-failover S", ErrBadRequest, region)
	}
	offerTo := s
	octx, cancel := context.WithTimeout(c.r.Context(), globalCallWait)
	defer cancel()
	if rt.sides.mirroring() {
		if offerTo = rt.link.AwaitGlobal(octx); offerTo == nil {
			return 0, nil, fmt.Errorf("%w: its link has not opened it (yet): a planned handoff needs it; {\"force\": true} takes the region over without it (docs/regions.md)", ErrGlobalUnreachable)
		}
	} else if v := rt.watcher.View(); len(nodesOf(v, region)) == 0 {
		if _, ok := v.Region(region); !ok {
			return 0, nil, fmt.Errorf("%w: region %s has no node and no record", ErrNoRoute, region)
		}
	}
	at, err := offerTo.ReadRegion(octx, region)
	if err == nil && req.To == global.LeaserRegion {
		// A global tier that does not answer is told below as such.
		if err = copies.RefuseRegionalLeasing(octx, offerTo, region); errors.Is(err, ErrSurvive) {
			return 0, nil, err
		}
	}
	if err == nil {
		var offered global.Versioned[global.Region]
		offered, err = c.rt.writeRegion(octx, offerTo, global.DirGlobal, region, at, func(r *global.Region) error { return r.Offer(req.To, rt.id, rt.now()) })
		at = offered
	}
	if err != nil {
		if rt.sides.mirroring() && octx.Err() != nil {
			return 0, nil, fmt.Errorf("%w: it did not answer within %v: a planned handoff needs it; {\"force\": true} takes the region over without it (docs/regions.md)", ErrGlobalUnreachable, globalCallWait)
		}
		return 0, nil, err
	}
	offered := at
	if rt.sides.mirroring() {
		rt.link.Wake()
	}
	return c.awaitHandoff(region, offered.Value, wait)
}

// handoffWaitOf reads ?wait=S, how long POST .../handoff waits for the
// handoff to end before it answers 202 with the state it is in: from 0 to
// handoffWait, which is also the default. A client whose own timeout is
// shorter asks for less, so it hears where the handoff stands.
func handoffWaitOf(q url.Values) (time.Duration, error) {
	if !q.Has("wait") {
		return handoffWait, nil
	}
	s, err := strconv.ParseFloat(q.Get("wait"), 64)
	if err != nil || !(s >= 0 && s <= handoffWait.Seconds()) { // NaN too
		return 0, fmt.Errorf("%w: ?wait is a number of seconds from 0 to %v", ErrBadRequest, handoffWait.Seconds())
	}
	return time.Duration(s * float64(time.Second)), nil
}

// awaitHandoff waits, within wait, for the handoff offered to be done or
// rolled back, as this router's view shows it; still in flight, it
// answers 202 with the record as the view has it (as offered, should the
// view not show the offer yet).
func (c *shardCall) awaitHandoff(region string, offered global.Region, wait time.Duration) (int, any, error) {
	at := offered.Handoff.At
	ctx, cancel := context.WithTimeout(c.r.Context(), wait)
	defer cancel()
	for {
		if v := c.rt.watcher.View(); v != nil {
			if rec, ok := v.Region(region); ok && rec.Handoff != nil && rec.Handoff.At.Equal(at) {
				switch rec.Handoff.State {
				case global.HandoffDone:
					return http.StatusOK, answerOf(rec), nil
				case global.HandoffRolledBack:
					return 0, nil, fmt.Errorf("%w: handoff of region %s rolled back: %s", global.ErrState, region, rec.Handoff.Why)
				}
			}
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			rec := c.rt.watcher.View().RegionRecord(region)
			if rec.Handoff == nil || !rec.Handoff.At.Equal(at) {
				rec = offered
			}
			return http.StatusAccepted, answerOf(rec), nil
		case <-t.C:
		}
	}
}

// forceTakeover serves a forced takeover: on region r's leading router,
// to the region, written into its own directory alone (the audit log has
// it, as every change).
func (c *shardCall) forceTakeover(s *global.Store, region, to string, evenIfGlobalAnswers bool) (int, any, error) {
	rt := c.rt
	ago, answers := time.Duration(0), false
	if rt.sides.mirroring() && rt.link != nil {
		if at := rt.link.GlobalAnswered(); !at.IsZero() {
			ago = rt.now().Sub(at)
			answers = ago < forceGuard
		}
	}
	switch {
	case !rt.sides.mirroring():
		return 0, nil, fmt.Errorf("%w: a forced takeover is made on region %s's leading router (fenec-shard --region %s --global ...), when the global tier cannot be reached", ErrNotOwner, region, region)
	case to != global.LeaserRegion:
		return 0, nil, fmt.Errorf("%w: only a region takes its leasing by force: hand it back to the global tier with {\"to\": \"global\"}", ErrBadRequest)
	case rt.cfg.AutoFailover <= 0:
		return 0, nil, fmt.Errorf("%w: this router runs without --auto-failover: it cannot lease region %s's nodes; restart it with --auto-failover S", ErrBadRequest, region)
	case answers && !evenIfGlobalAnswers:
		return 0, nil, fmt.Errorf("%w: the global directory answered this router %.1f s ago (within %v): use a planned handoff ({\"to\": \"region\"} without force; fenec handoff %s --to region); to force anyway while it answers, add \"even_if_global_answers\": true (fenec handoff %s --to region --force --even-if-global-answers)",
			ErrGlobalAnswers, ago.Seconds(), forceGuard, region, region)
	}
	ctx := c.r.Context()
	at, err := s.ReadRegion(ctx, region)
	if err != nil {
		return 0, nil, err
	}
	lr, err := s.LeaseRecord(ctx)
	if err != nil {
		return 0, nil, err
	}
	known := max(at.Value.Epoch, rt.link.GlobalEpoch())
	forced, err := c.rt.writeRegion(ctx, s, global.DirOfRegion(region), region, at, func(r *global.Region) error {
		return r.Force(rt.id, known, lr.Value, c.r.RemoteAddr, rt.now())
	})
	if err != nil {
		return 0, nil, err
	}
	c.settle(forced.Rev)
	fenced := nodesOf(rt.watcher.View(), region)
	slices.Sort(fenced)
	rt.log.Warn("forced takeover: the region leases its nodes without the global tier", "region", region,
		"epoch", forced.Value.Epoch, "global_record_ms", lr.Value, "nodes", fenced, "even_if_global_answers", evenIfGlobalAnswers)
	rt.auditControl("forced_takeover", "", fmt.Sprintf("region %s force true epoch %d even_if_global_answers %v (global directory last answered %s); nodes fenced: %s",
		region, forced.Value.Epoch, evenIfGlobalAnswers, answeredAgo(answers, ago), strings.Join(fenced, ",")))
	rt.link.Wake()
	return http.StatusOK, answerOf(forced.Value), nil
}
