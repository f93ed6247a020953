package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// routerVerb registers the router flags and returns a runner that makes
// the client and hands it to fn.
func routerVerb(fs *flag.FlagSet, e *env, fn func(ctx context.Context, c *routerClient, pos []string) error) runFunc {
	o := addRouterFlags(fs, e)
	return func(ctx context.Context, pos []string) error {
		c, err := o.client(e)
		if err != nil {
			return err
		}
		defer c.close()
		return fn(ctx, c, pos)
	}
}

// list GETs path and prints the list as a table (or the JSON).
func (c *routerClient) list(ctx context.Context, path string, cols []column) error {
	b, err := c.call(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(b)
	}
	rows, err := decodeRows(b)
	if err != nil {
		return err
	}
	return printTable(c.out, cols, rows)
}

// done prints a change's answer: the JSON with -o json, else line.
func (c *routerClient) done(b []byte, line string) error {
	if c.json {
		return c.printJSON(b)
	}
	_, err := fmt.Fprintln(c.out, line)
	return err
}

// tenantPath is /_shard/tenants/<t> with rest after it.
func tenantPath(t, rest string) string { return "/_shard/tenants/" + url.PathEscape(t) + rest }

// setupNodes is `fenec nodes` and `fenec nodes rm NAME`.
func setupNodes(fs *flag.FlagSet, e *env) runFunc {
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		switch {
		case len(pos) == 0:
			return c.list(ctx, "/_shard/nodes", []column{field("NAME", "name"), field("ADDR", "addr"),
				field("REGION", "region"), flagCol("STANDBY", "standby"), flagCol("LEASE", "lease"), field("ID", "id")})
		case len(pos) == 2 && pos[0] == "rm":
			b, err := c.call(ctx, http.MethodDelete, "/_shard/nodes/"+url.PathEscape(pos[1]), nil, http.StatusNoContent)
			if err != nil {
				return err
			}
			if len(b) == 0 {
				b = []byte(`{"node":` + quote(pos[1]) + `,"forgotten":true}`)
			}
			return c.done(b, "node "+pos[1]+" forgotten")
		}
		return fmt.Errorf("%w: want no arguments, or rm NAME", errUsage)
	})
}

// setupTenants is `fenec tenants [--bytes]`.
func setupTenants(fs *flag.FlagSet, e *env) runFunc {
	bytes := fs.Bool("bytes", false, "ask each tenant's node its bytes on disk")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 0, ""); err != nil {
			return err
		}
		path := "/_shard/tenants"
		cols := []column{field("NAME", "name"), field("NODE", "node"), field("STATE", "state"),
			field("REPLICA", "replica"), field("REPLICA_BEHIND", "replica_behind"), field("HELD_BY", "held_by"),
			field("TARGET", "target"), field("STEP", "move_step")}
		if *bytes {
			path += "?bytes"
			cols = append(cols, field("BYTES", "bytes"))
		}
		return c.list(ctx, path, cols)
	})
}

// setupRegions is `fenec regions`.
func setupRegions(fs *flag.FlagSet, e *env) runFunc {
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 0, ""); err != nil {
			return err
		}
		b, err := c.call(ctx, http.MethodGet, "/_shard/regions", nil)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(b)
		}
		rows, err := decodeRows(b)
		if err != nil {
			return err
		}
		global := inGlobalDirectory(rows)
		return printTable(c.out, []column{field("NAME", "name"),
			{header: "LEASED_BY", cell: func(row map[string]any) string { return leasedBy(row, global) }},
			field("ROUTER", "router"), field("TERM", "term"), field("NODES", "nodes"), flagCol("MIRRORED_HERE", "mirrored")}, rows)
	})
}

// inGlobalDirectory says whether the router asked is one of the global
// directory's (no --region): a region's router lists its own region as
// mirrored there. The global directory is then the router's own — with
// no region of its own anywhere, as under fenec dev, the only one — and
// "global" is said as this-directory rather than a tier the operator may
// not have.
func inGlobalDirectory(rows []map[string]any) bool {
	for _, row := range rows {
		if m, _ := row["mirrored"].(bool); m {
			return false
		}
	}
	return true
}

// leasedBy says who leases a region's nodes, in one word a cell holds:
// the router's own directory (global, asked of a router of the global
// directory), the global tier (asked of a region's router), the region,
// or nobody while a handoff is given and not yet taken. Leasing also
// needs the leasing side's router to run --auto-failover (fenec leases
// says whether it does).
func leasedBy(row map[string]any, global bool) string {
	switch row["leaser"] {
	case "global":
		if global {
			return "this-directory"
		}
		return "global-tier"
	case "region":
		return "region"
	case "":
		return "handoff-given"
	}
	return cellText(row["leaser"])
}

// setupLeases is `fenec leases`.
func setupLeases(fs *flag.FlagSet, e *env) runFunc {
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 0, ""); err != nil {
			return err
		}
		b, err := c.call(ctx, http.MethodGet, "/_shard/leases", nil)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(b)
		}
		var ans struct {
			Leasing bool             `json:"leasing"`
			Term    uint64           `json:"term"`
			LeaseMS int64            `json:"lease_ms"`
			Nodes   []map[string]any `json:"nodes"`
		}
		if err := json.Unmarshal(b, &ans); err != nil {
			return fmt.Errorf("the router's answer: %w", err)
		}
		if !ans.Leasing {
			fmt.Fprintln(c.out, "this router grants no lease: it does not lead, or runs without --auto-failover; ask the leading router")
			return nil
		}
		fmt.Fprintf(c.out, "leasing at term %d, lease %.2fs\n", ans.Term, float64(ans.LeaseMS)/1000)
		return printTable(c.out, []column{field("NODE", "node"), flagCol("ANSWERED", "answered"),
			msCol("LAST_ANSWER", "last_answer_ms"), msCol("LEASE", "lease_ms"), msCol("LEFT", "left_ms"),
			flagCol("RAN", "ran"), flagCol("FAILED_OVER", "failed_over"), flagCol("TAKES_LEASE", "takes_lease"),
			field("TENANTS", "tenants"), field("OUTSTANDING", "outstanding")}, ans.Nodes)
	})
}

// setupPlace is `fenec place TENANT [--node N] [--region R]`.
func setupPlace(fs *flag.FlagSet, e *env) runFunc {
	node := fs.String("node", "", "the `NODE` to create it on (default: the region's node with the fewest bytes)")
	region := fs.String("region", "", "the `REGION` to place it in (default: the router's)")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 1, "one TENANT"); err != nil {
			return err
		}
		body := map[string]string{}
		if *node != "" {
			body["node"] = *node
		}
		if *region != "" {
			body["region"] = *region
		}
		b, err := c.call(ctx, http.MethodPut, tenantPath(pos[0], ""), body, http.StatusCreated)
		if err != nil {
			return err
		}
		var ans struct{ Tenant, Node string }
		_ = json.Unmarshal(b, &ans)
		return c.done(b, fmt.Sprintf("tenant %s placed on %s", pos[0], ans.Node))
	})
}

// setupMove is `fenec move TENANT --to NODE`.
func setupMove(fs *flag.FlagSet, e *env) runFunc {
	to := fs.String("to", "", "the `NODE` to move it to")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 1, "one TENANT"); err != nil {
			return err
		}
		if *to == "" {
			return fmt.Errorf("%w: --to NODE is required", errUsage)
		}
		b, err := c.call(ctx, http.MethodPost, tenantPath(pos[0], "/move"), map[string]string{"to": *to}, http.StatusOK)
		if err != nil {
			return err
		}
		var ans struct {
			From, To, By string
			Bytes, MS    int64
			PauseMS      int64 `json:"pause_ms"`
		}
		_ = json.Unmarshal(b, &ans)
		return c.done(b, fmt.Sprintf("moved %s from %s to %s by %s: %d bytes in %d ms, writes paused %d ms",
			pos[0], ans.From, ans.To, ans.By, ans.Bytes, ans.MS, ans.PauseMS))
	})
}

// setupSurvive is `fenec survive TENANT zone|region [--copy NODE]`.
func setupSurvive(fs *flag.FlagSet, e *env) runFunc {
	cp := fs.String("copy", "", "with region: the `NODE` of another region to hold its voting copy (default: the router picks one)")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 2, "a TENANT and zone or region"); err != nil {
			return err
		}
		body := map[string]string{"survive": pos[1]}
		if *cp != "" {
			body["copy"] = *cp
		}
		b, err := c.call(ctx, http.MethodPut, tenantPath(pos[0], "/survive"), body, http.StatusOK)
		if err != nil {
			return err
		}
		var ans struct{ Survive, Node, Replica string }
		_ = json.Unmarshal(b, &ans)
		return c.done(b, fmt.Sprintf("%s survives its %s: primary %s, copy %s", pos[0], ans.Survive, ans.Node, orNone(strings.Fields(ans.Replica))))
	})
}

// setupReadCopies is `fenec read-copies TENANT NODE...` (or --regions, or
// --none): the tenant's read copies, all of them.
func setupReadCopies(fs *flag.FlagSet, e *env) runFunc {
	none := fs.Bool("none", false, "drop every read copy of the tenant")
	regions := fs.String("regions", "", "one read copy in each of these `REGIONS` (comma-separated), on the node the router picks there")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if len(pos) == 0 {
			return fmt.Errorf("%w: want a TENANT and the NODEs to hold its read copies (or --regions, or --none)", errUsage)
		}
		nodes := pos[1:]
		var body map[string][]string
		switch {
		case *none && (len(nodes) > 0 || *regions != ""):
			return fmt.Errorf("%w: --none drops every read copy: name no NODE nor --regions with it", errUsage)
		case *regions != "" && len(nodes) > 0:
			return fmt.Errorf("%w: name the NODEs to hold %s's read copies, or --regions for one in each, not both", errUsage, pos[0])
		case *regions != "":
			rs := strings.Split(*regions, ",")
			if slices.Contains(rs, "") {
				return fmt.Errorf("%w: --regions %q: want region names separated by commas, such as us,ap", errUsage, *regions)
			}
			body = map[string][]string{"regions": rs}
		case !*none && len(nodes) == 0:
			return fmt.Errorf("%w: name the NODEs to hold %s's read copies, --regions for one in each, or --none to drop them all", errUsage, pos[0])
		default:
			body = map[string][]string{"nodes": append([]string{}, nodes...)}
		}
		b, err := c.call(ctx, http.MethodPut, tenantPath(pos[0], "/read-copies"), body, http.StatusOK)
		if err != nil {
			return err
		}
		var ans struct {
			ReadCopies []string `json:"read_copies"`
			Added      []string `json:"added"`
			Dropped    []string `json:"dropped"`
		}
		_ = json.Unmarshal(b, &ans)
		msg := fmt.Sprintf("%s's read copies: %s", pos[0], orNone(ans.ReadCopies))
		if len(ans.Added)+len(ans.Dropped) > 0 {
			msg += fmt.Sprintf(" (added %s, dropped %s)", orNone(ans.Added), orNone(ans.Dropped))
		}
		return c.done(b, msg)
	})
}

// orNone lists names, or says none.
func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// failedEntry is a tenant an operation left as it was, and why.
type failedEntry struct {
	Tenant string `json:"tenant"`
	Why    string `json:"why"`
}

// setupFailover is `fenec failover NODE [--force] [--yes]`. A node that
// still answers the router is failed over only once the operator says so:
// asked on a terminal, or --yes.
func setupFailover(fs *flag.FlagSet, e *env) runFunc {
	force := fs.Bool("force", false, "promote copies the router would refuse (behind, of another history): loses what they lack")
	yes := fs.Bool("yes", false, "fail the node over even if it answers the router, without asking (for scripts)")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 1, "one NODE"); err != nil {
			return err
		}
		node := pos[0]
		body := map[string]bool{}
		if *force {
			body["force"] = true
		}
		if !*yes {
			body["if_down"] = true // the router refuses, changing nothing, if the node answers
		}
		path := "/_shard/nodes/" + url.PathEscape(node) + "/failover"
		b, err := c.call(ctx, http.MethodPost, path, body, http.StatusOK, http.StatusBadGateway)
		if rf := (*refusal)(nil); errors.As(err, &rf) && rf.answers {
			question := fmt.Sprintf("node %s answers the router: a failover moves its tenants' writes to their copies while it still serves them. Fail it over all the same? [y/N] ", node)
			switch {
			case !e.interactive:
				return fmt.Errorf("node %s answers the router, so nothing was failed over: with no terminal to ask on, run this again with --yes to fail it over all the same", node)
			case !e.confirm(question):
				return fmt.Errorf("node %s answers the router: nothing was failed over", node)
			}
			delete(body, "if_down")
			b, err = c.call(ctx, http.MethodPost, path, body, http.StatusOK, http.StatusBadGateway)
		}
		if err != nil {
			return err
		}
		var ans struct {
			Promoted []string      `json:"promoted"`
			Failed   []failedEntry `json:"failed"`
		}
		if err := json.Unmarshal(b, &ans); err != nil {
			return fmt.Errorf("the router's answer: %w", err)
		}
		if c.json {
			if err := c.printJSON(b); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(c.out, "node %s: %s", node, counted(len(ans.Promoted), "tenant promoted on its copy", "tenants promoted on their copies"))
			if len(ans.Promoted) > 0 {
				fmt.Fprintf(c.out, ": %s", strings.Join(ans.Promoted, ", "))
			}
			fmt.Fprintln(c.out)
			printFailed(c, ans.Failed)
		}
		if len(ans.Failed) > 0 {
			return fmt.Errorf("%s left on %s: %s", counted(len(ans.Failed), "tenant was", "tenants were"), node, failoverHint(ans.Failed, *force))
		}
		return nil
	})
}

// failoverHint says what to do about the tenants a failover left: --force
// only where it can help (a copy the router refused), never for a tenant
// with no copy at all.
func failoverHint(failed []failedEntry, forced bool) string {
	noCopy := 0
	for _, f := range failed {
		if strings.Contains(f.Why, "no replica") {
			noCopy++
		}
	}
	var hints []string
	if noCopy > 0 {
		hints = append(hints, "a tenant with no replica has no copy to promote: it comes back with its node, or from a backup (`fenec restore`); `fenec replicas` gives every tenant one")
	}
	if noCopy < len(failed) {
		h := "read why, and send the failover again"
		if !forced {
			h += "; --force promotes a copy the router refused, losing what it lacks"
		}
		hints = append(hints, h)
	}
	return strings.Join(hints, "; ")
}

// printFailed lists what an operation left undone, as a table.
func printFailed(c *routerClient, failed []failedEntry) {
	if len(failed) == 0 {
		return
	}
	rows := make([]map[string]any, len(failed))
	for i, f := range failed {
		rows[i] = map[string]any{"tenant": f.Tenant, "why": inVerbs(f.Why)}
	}
	fmt.Fprintln(c.out, "not done:")
	_ = printTable(c.out, []column{field("TENANT", "tenant"), field("WHY", "why")}, rows)
}

// setupPromote is `fenec promote [--again]`: a router that leads already
// says so and changes nothing, unless --again moves its term on.
func setupPromote(fs *flag.FlagSet, e *env) runFunc {
	again := fs.Bool("again", false, "on the router that leads already: take the lead again at the next term (fences out anything of the term before)")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 0, ""); err != nil {
			return err
		}
		var body any
		if *again {
			body = map[string]bool{"again": true}
		}
		b, err := c.call(ctx, http.MethodPost, "/_shard/promote", body, http.StatusOK)
		if err != nil {
			return err
		}
		var ans struct {
			Leader  string `json:"leader"`
			Term    uint64 `json:"term"`
			Already bool   `json:"already"`
		}
		_ = json.Unmarshal(b, &ans)
		if ans.Already {
			return c.done(b, fmt.Sprintf("router %s already leads at term %d: nothing changed (--again takes the lead again at the next term)", ans.Leader, ans.Term))
		}
		return c.done(b, fmt.Sprintf("router %s leads at term %d", ans.Leader, ans.Term))
	})
}

// setupReplicas is `fenec replicas`.
func setupReplicas(fs *flag.FlagSet, e *env) runFunc {
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 0, ""); err != nil {
			return err
		}
		b, err := c.call(ctx, http.MethodPost, "/_shard/replicas", nil, http.StatusOK, http.StatusBadGateway)
		if err != nil {
			return err
		}
		var ans struct {
			Replicated []string      `json:"replicated"`
			Failed     []failedEntry `json:"failed"`
		}
		if err := json.Unmarshal(b, &ans); err != nil {
			return fmt.Errorf("the router's answer: %w", err)
		}
		if c.json {
			if err := c.printJSON(b); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(c.out, "%s given a replica", counted(len(ans.Replicated), "tenant"))
			if len(ans.Replicated) > 0 {
				fmt.Fprintf(c.out, ": %s", strings.Join(ans.Replicated, ", "))
			}
			fmt.Fprintln(c.out)
			printFailed(c, ans.Failed)
		}
		if len(ans.Failed) > 0 {
			return fmt.Errorf("%s still no replica: the router asks again over the next minutes; send it again once their nodes answer", counted(len(ans.Failed), "tenant has", "tenants have"))
		}
		return nil
	})
}

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

// setupQuota is `fenec quota TENANT [--bytes N ...]`: without a limit
// named it reads the quota; with some, it sets those and keeps the others
// — read, changed and written back on the condition that nobody changed
// it in between (If-Match), else applied again to what it holds now.
func setupQuota(fs *flag.FlagSet, e *env) runFunc {
	vals := map[string]*int64{}
	for _, f := range quotaFields {
		vals[f.name] = fs.Int64(strings.ReplaceAll(f.name, "_", "-"), 0, f.usage+" (0: no limit)")
	}
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if err := wantArgs(pos, 1, "one TENANT"); err != nil {
			return err
		}
		got, err := c.callWith(ctx, http.MethodGet, tenantPath(pos[0], "/quota"), nil, nil, http.StatusOK)
		if err != nil {
			return err
		}
		set := map[string]int64{}
		fs.Visit(func(f *flag.Flag) {
			if v, ok := vals[strings.ReplaceAll(f.Name, "-", "_")]; ok {
				set[strings.ReplaceAll(f.Name, "-", "_")] = *v
			}
		})
		b := got.body
		if len(set) > 0 {
			if b, err = c.setQuota(ctx, pos[0], got.body, got.header.Get("ETag"), set); err != nil {
				return err
			}
		}
		if c.json {
			return c.printJSON(b)
		}
		return printQuota(c, pos[0], b, len(set) > 0)
	})
}

// setQuota applies the limits set to tenant's quota, read as b with tag,
// and writes it back if nobody changed it since (If-Match). When someone
// did, the router answers 409 with the quota now and its tag: the limits
// are applied to that and sent again, quotaTries times at most. It
// returns the router's answer to the write that landed.
func (c *routerClient) setQuota(ctx context.Context, tenant string, b []byte, tag string, set map[string]int64) ([]byte, error) {
	for range quotaTries {
		q := map[string]any{}
		if err := json.Unmarshal(b, &q); err != nil {
			return nil, fmt.Errorf("the router's answer: %w", err)
		}
		for k, v := range set {
			q[k] = v
		}
		var hdr http.Header
		if tag != "" {
			hdr = http.Header{"If-Match": {tag}}
		}
		a, err := c.callWith(ctx, http.MethodPut, tenantPath(tenant, "/quota"), q, hdr, http.StatusOK, http.StatusConflict)
		if err != nil {
			return nil, err
		}
		if a.status == http.StatusOK {
			return a.body, nil
		}
		var changed struct {
			Error string          `json:"error"`
			Quota json.RawMessage `json:"quota"`
			ETag  string          `json:"etag"`
		}
		if err := json.Unmarshal(a.body, &changed); err != nil || changed.ETag == "" {
			// Another refusal (a held tenant, a lost race): the router's.
			return nil, readRefusal(&http.Response{StatusCode: a.status, Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body))})
		}
		b, tag = changed.Quota, changed.ETag
	}
	return nil, fmt.Errorf("the quota of %s changed %d times while these limits were being set: look at it (fenec quota %s) and set them again", tenant, quotaTries, tenant)
}

// printQuota shows a quota answer as a table, and the nodes that did not
// take a quota just set.
func printQuota(c *routerClient, tenant string, b []byte, set bool) error {
	var ans map[string]any
	if err := json.Unmarshal(b, &ans); err != nil {
		return fmt.Errorf("the router's answer: %w", err)
	}
	q, _ := ans["quota"].(map[string]any)
	if q == nil {
		q = ans
	}
	rows := make([]map[string]any, 0, len(quotaFields))
	for _, f := range quotaFields {
		v := q[f.name]
		if n, ok := v.(float64); ok && n == 0 {
			v = "no limit"
		}
		rows = append(rows, map[string]any{"limit": f.name, "value": v})
	}
	fmt.Fprintf(c.out, "tenant %s\n", tenant)
	if err := printTable(c.out, []column{field("LIMIT", "limit"), field("VALUE", "value")}, rows); err != nil {
		return err
	}
	if !set {
		return nil
	}
	var took struct {
		Took   []string `json:"took"`
		Failed []struct {
			Node string `json:"node"`
			Why  string `json:"why"`
		} `json:"failed"`
	}
	_ = json.Unmarshal(b, &took)
	fmt.Fprintf(c.out, "stored; taken by %s\n", strings.Join(took.Took, ", "))
	for _, f := range took.Failed {
		fmt.Fprintf(c.out, "not taken by %s (%s): it is sent again at the tenant's next move, copy or promotion\n", f.Node, f.Why)
	}
	return nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
