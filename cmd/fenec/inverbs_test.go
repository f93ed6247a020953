package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestInVerbs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"unknown tenant \"orders\": no placement names it; create it with PUT /_shard/tenants/orders",
			"unknown tenant \"orders\": no placement names it; create it with `fenec place orders`"},
		{"unknown tenant: no placement names it; create it with PUT /_shard/tenants/<name>",
			"unknown tenant: no placement names it; create it with `fenec place NAME`"},
		{"give it a read copy here, PUT /_shard/tenants/<name>/read-copies on the global tier's leading router",
			"give it a read copy here, `fenec read-copies NAME NODE...` on the global tier's leading router"},
		{"unknown node \"n1\": no node is recorded under that name (GET /_shard/nodes lists them)",
			"unknown node \"n1\": no node is recorded under that name (`fenec nodes` lists them)"},
		{"record a node of that region (PUT /_shard/nodes/<n>), or name a region GET /_shard/regions lists",
			"record a node of that region (`fenec register $FENEC_ROUTER --name NAME --addr NODE_URL`), or name a region `fenec regions` lists"},
		{"move them off first (POST /_shard/tenants/<t>/move), or fail the node over",
			"move them off first (`fenec move NAME --to NODE`), or fail the node over"},
		{`hand it back first (POST /_shard/regions/eu/handoff {"to": "global"})`,
			"hand it back first (`fenec handoff eu --to global`)"},
		{"forget one of the names (DELETE /_shard/nodes/<name>)", "forget one of the names (`fenec nodes rm NAME`)"},
		{"fail it over with POST /_shard/nodes/<node>/failover", "fail it over with `fenec failover NAME`"},
		{"ask again once it ends (GET /_shard/tenants shows held_by until then)", "ask again once it ends (`fenec tenants` shows held_by until then)"},
		{"start or promote one (fenec-shard --auto-failover S, POST /_shard/promote)", "start or promote one (fenec-shard --auto-failover S, `fenec promote`)"},
		{"nothing about routes here", "nothing about routes here"},
		{"POST /t/orders/query is the data API's", "POST /t/orders/query is the data API's"},
	} {
		if got := inVerbs(tc.in); got != tc.want {
			t.Errorf("inVerbs(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// TestInVerbsCoversTheRouter reads every string of the router's code that
// names a /_shard/ route with its method — what its messages tell a
// client to do — and checks the CLI says each with a verb: a route added
// to a message without a verb here fails.
func TestInVerbsCoversTheRouter(t *testing.T) {
	found := 0
	for _, dir := range []string{"../../region", "../../region/forward", "../../global"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || !routeRef.MatchString(s) {
					return true
				}
				found++
				if out := inVerbs(s); routeRef.MatchString(out) {
					t.Errorf("%s: the CLI has no verb for the route in %q (it says %q)", f, s, out)
				}
				return true
			})
		}
	}
	if found < 5 {
		t.Fatalf("found %d of the router's messages naming a route: the scan no longer reads them", found)
	}
}
