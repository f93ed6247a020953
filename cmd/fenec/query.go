package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// queryOpts are the flags of `fenec query`.
type queryOpts struct {
	tenants string
	concat  bool
	order   string
	limit   int
	group   string
	sum     string
	count   string
	min     string
	max     string
	params  string
}

// setupQuery is `fenec query [--tenants a,b] MERGE QUERY`: the router's
// read across tenants (POST /_shard/query).
func setupQuery(fs *flag.FlagSet, e *env) runFunc {
	q := &queryOpts{}
	fs.StringVar(&q.tenants, "tenants", "*", "the `TENANTS` to read, comma-separated (default every tenant)")
	fs.BoolVar(&q.concat, "concat", false, "merge: every tenant's rows, one tenant after another (the default)")
	fs.StringVar(&q.order, "order", "", "merge: the first rows of every tenant's, by `FIELD[.desc],...` as in a REST read's order= (FIELD:desc too; each tenant's query must order so)")
	fs.IntVar(&q.limit, "limit", 0, "with --order: how many rows (0: all)")
	fs.StringVar(&q.group, "group", "", "merge: one row per distinct value of `KEYS` (comma-separated; _tenant groups by tenant)")
	fs.StringVar(&q.sum, "sum", "", "with --group: sum these `FIELDS`")
	fs.StringVar(&q.count, "count", "", "with --group: count rows under this `NAME`")
	fs.StringVar(&q.min, "min", "", "with --group: the least of these `FIELDS`")
	fs.StringVar(&q.max, "max", "", "with --group: the greatest of these `FIELDS`")
	fs.StringVar(&q.params, "params", "", "the query's $1, $2, ... as a JSON `ARRAY`")
	return routerVerb(fs, e, func(ctx context.Context, c *routerClient, pos []string) error {
		if len(pos) == 0 {
			return fmt.Errorf("%w: want the QUERY (one argument, quoted)", errUsage)
		}
		body, err := q.request(strings.Join(pos, " "))
		if err != nil {
			return err
		}
		b, err := c.call(ctx, http.MethodPost, "/_shard/query", body, http.StatusOK)
		if err != nil {
			return err
		}
		return printQueryAnswer(c, b)
	})
}

// request builds the body of POST /_shard/query.
func (q *queryOpts) request(query string) (map[string]any, error) {
	body := map[string]any{"query": query}
	if q.tenants == "*" || q.tenants == "" {
		body["tenants"] = "*"
	} else {
		body["tenants"] = splitList(q.tenants)
	}
	if q.params != "" {
		var p []any
		if err := json.Unmarshal([]byte(q.params), &p); err != nil {
			return nil, fmt.Errorf("%w: --params must be a JSON array: %v", errUsage, err)
		}
		body["params"] = p
	}
	kinds := 0
	for _, on := range []bool{q.concat, q.order != "", q.group != ""} {
		if on {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, fmt.Errorf("%w: name one merge: --concat, --order or --group", errUsage)
	}
	if q.group == "" && (q.sum != "" || q.count != "" || q.min != "" || q.max != "") {
		return nil, fmt.Errorf("%w: --sum, --count, --min and --max go with --group", errUsage)
	}
	if q.order == "" && q.limit != 0 {
		return nil, fmt.Errorf("%w: --limit goes with --order", errUsage)
	}
	merge := map[string]any{}
	switch {
	case q.order != "":
		var keys []map[string]any
		for _, k := range splitList(q.order) {
			name, desc, err := orderKey(k)
			if err != nil {
				return nil, err
			}
			key := map[string]any{"field": name}
			if desc {
				key["desc"] = true
			}
			keys = append(keys, key)
		}
		merge["order"] = keys
		if q.limit > 0 {
			merge["limit"] = q.limit
		}
	case q.group != "":
		merge["group"] = splitList(q.group)
		for name, v := range map[string]string{"sum": q.sum, "min": q.min, "max": q.max} {
			if v != "" {
				merge[name] = splitList(v)
			}
		}
		if q.count != "" {
			merge["count"] = q.count
		}
	default:
		merge["concat"] = true
	}
	body["merge"] = merge
	return body, nil
}

// orderKey reads one key of --order: FIELD, FIELD.asc or FIELD.desc, as a
// REST read's order= spells it, or FIELD:asc and FIELD:desc.
func orderKey(k string) (field string, desc bool, err error) {
	switch {
	case strings.HasSuffix(k, ".desc"):
		return strings.TrimSuffix(k, ".desc"), true, nil
	case strings.HasSuffix(k, ".asc"):
		return strings.TrimSuffix(k, ".asc"), false, nil
	}
	name, dir, _ := strings.Cut(k, ":")
	switch dir {
	case "", "asc":
		return name, false, nil
	case "desc":
		return name, true, nil
	}
	return "", false, fmt.Errorf("%w: --order %q: a key is FIELD, FIELD.asc or FIELD.desc", errUsage, k)
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// printQueryAnswer prints the merged rows, then how each tenant answered;
// a tenant that failed makes the command fail, once everything is shown.
func printQueryAnswer(c *routerClient, b []byte) error {
	var ans struct {
		Rows    []map[string]any `json:"rows"`
		Tenants map[string]struct {
			Seq   *uint64 `json:"seq"`
			Rows  *int    `json:"rows"`
			Error string  `json:"error"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return fmt.Errorf("the router's answer: %w", err)
	}
	var failed []string
	for name, t := range ans.Tenants {
		if t.Error != "" {
			failed = append(failed, name+": "+t.Error)
		}
	}
	slices.Sort(failed)
	if c.json {
		if err := c.printJSON(b); err != nil {
			return err
		}
	} else {
		var cols []column
		for _, k := range keysOf(ans.Rows, "_tenant") {
			cols = append(cols, field(strings.ToUpper(k), k))
		}
		if len(cols) > 0 {
			if err := printTable(c.out, cols, ans.Rows); err != nil {
				return err
			}
		}
		fmt.Fprintf(c.out, "%s from %s\n", counted(len(ans.Rows), "row"), counted(len(ans.Tenants)-len(failed), "tenant"))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s not answer (the rows above are the others'):\n  %s", counted(len(failed), "tenant did", "tenants did"), strings.Join(failed, "\n  "))
	}
	return nil
}
