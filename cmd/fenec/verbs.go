package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
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

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
