package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// setupHandoff is `fenec handoff REGION --to global|region [--force
// [--even-if-global-answers]] [--wait]`. The router answers once the handoff is done, or 202 with the
// state it is in while it is still in flight: that is no failure; with
// --wait the CLI follows it in GET /_shard/regions until it is done or
// rolled back.
func setupHandoff(fs *flag.FlagSet, e *env) runFunc {
	to := fs.String("to", "", "who leases the region from now: `global` or region")
	force := fs.Bool("force", false, "(on the region's leading router) take the leasing without the global tier; refused while the global directory answered within 10 s")
	evenIf := fs.Bool("even-if-global-answers", false, "with --force: take the leasing by force although the global directory answers (a planned handoff is the way while it does)")
	wait := fs.Bool("wait", false, "if the handoff is still in flight when the router answers, wait until it is done or rolled back")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 1, "one REGION"); err != nil {
			return err
		}
		if *to != "global" && *to != "region" {
			return fmt.Errorf("%w: --to must be global or region", errUsage)
		}
		body := map[string]any{"to": *to}
		if *evenIf && !*force {
			return fmt.Errorf("%w: --even-if-global-answers goes with --force", errUsage)
		}
		if *force {
			body["force"] = true
		}
		if *evenIf {
			body["even_if_global_answers"] = true
		}
		// The router answers within half the CLI's own bound (30 s at most),
		// so an answer in flight is heard rather than timed out.
		within := min(c.timeout/2, handoffAnswerWithin)
		path := "/_shard/regions/" + url.PathEscape(pos[0]) + "/handoff?wait=" + strconv.FormatFloat(within.Seconds(), 'f', -1, 64)
		status, b, err := c.callStatus(ctx, http.MethodPost, path, body, http.StatusOK, http.StatusAccepted)
		if err != nil {
			return err
		}
		var ans regionAnswer
		if err := json.Unmarshal(b, &ans); err != nil {
			return fmt.Errorf("the router's answer: %w", err)
		}
		if status == http.StatusOK || ans.Handoff == nil {
			return c.done(b, fmt.Sprintf("region %s: leasing handed to %s", pos[0], *to))
		}
		if !*wait {
			return c.done(b, fmt.Sprintf("region %s: handoff to %s in flight (%s); `fenec regions` shows when it is done, or send this again with --wait", pos[0], *to, ans.State))
		}
		if !c.json {
			fmt.Fprintf(c.out, "region %s: handoff to %s in flight (%s): waiting until it is done or rolled back\n", pos[0], *to, ans.State)
		}
		return c.awaitHandoff(ctx, pos[0], *to, ans.Handoff.At)
	})
}

// handoffAnswerWithin is the longest the router waits on a handoff before
// answering 202 (its own bound).
const handoffAnswerWithin = 30 * time.Second

// handoffPoll is how often `fenec handoff --wait` looks at the regions.
const handoffPoll = 250 * time.Millisecond

// regionAnswer is what the CLI reads of a region record: the state of the
// handoff POST .../handoff answered, or of the region's last handoff in
// GET /_shard/regions.
type regionAnswer struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Handoff *struct {
		State string    `json:"state"`
		At    time.Time `json:"at"`
		Why   string    `json:"why"`
	} `json:"handoff"`
}

// awaitHandoff follows the handoff of region asked at at in GET
// /_shard/regions until it is done (nil) or rolled back (its why).
func (c *routerClient) awaitHandoff(ctx context.Context, region, to string, at time.Time) error {
	tick := time.NewTicker(handoffPoll)
	defer tick.Stop()
	for {
		b, err := c.call(ctx, http.MethodGet, "/_shard/regions", nil)
		if err != nil {
			return err
		}
		var raw []json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return fmt.Errorf("the router's answer: %w", err)
		}
		for _, rb := range raw {
			var r regionAnswer
			if err := json.Unmarshal(rb, &r); err != nil {
				return fmt.Errorf("the router's answer: %w", err)
			}
			if r.Name != region || r.Handoff == nil || !r.Handoff.At.Equal(at) {
				continue
			}
			switch r.Handoff.State {
			case "done":
				return c.done(rb, fmt.Sprintf("region %s: leasing handed to %s", region, to))
			case "rolled_back":
				return fmt.Errorf("handoff of region %s rolled back: %s; the side that leased it still does", region, r.Handoff.Why)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// quotaFields are the quota's fields, flag name and JSON name alike.
var quotaFields = []struct{ name, usage string }{
	{"bytes", "bytes the tenant's file may hold"},
	{"rows", "rows the tenant's collections may hold"},
	{"streams", "subscriptions open at once"},
	{"requests", "requests running at once"},
	{"rows_per_s", "rows written a second"},
	{"bytes_per_s", "bytes written a second"},
}

// quotaTries bounds how often `fenec quota` applies its limits again to a
// quota another operator changed meanwhile.
const quotaTries = 5
