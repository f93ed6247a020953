package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
)

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
