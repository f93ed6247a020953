package main

import (
	"regexp"
	"strings"
)

// A router's messages say what to do next in its HTTP API's terms
// ("create it with PUT /_shard/tenants/orders"): right for a client of
// the API, and a detour for an operator at the CLI, who has a verb for
// each. inVerbs says them with the verbs.

// routeRef is a route of /_shard/ as a router's message names it: the
// method, the route's words, a name in it (a literal or a placeholder
// such as <t>), a last word, and a JSON body after it.
var routeRef = regexp.MustCompile(`\b(GET|PUT|POST|DELETE) /_shard/([a-z]+)(?:/([^\s/),;]+))?(?:/([a-z]+(?:-[a-z]+)*))?(?: (\{[^}]*\}))?`)

// inVerbs rewrites every route of /_shard/ msg names as the CLI command
// that sends it; a route with no verb is left as it is.
func inVerbs(msg string) string {
	return routeRef.ReplaceAllStringFunc(msg, func(ref string) string {
		m := routeRef.FindStringSubmatch(ref)
		if verb := verbOf(m[1], m[2], placeholder(m[3]), m[4], m[5]); verb != "" {
			return verb
		}
		return ref
	})
}

// placeholder spells a route's name for the command line: a placeholder
// (<t>, <name>, {tenant}, %s) as NAME, a literal as it is.
func placeholder(name string) string {
	if name == "" || strings.ContainsAny(name, "<>{}%") {
		return "NAME"
	}
	return name
}

// verbOf is the command that sends method to /_shard/words/name/last
// with body, or "".
func verbOf(method, words, name, last, body string) string {
	switch {
	case method == "GET" && words == "nodes" && last == "":
		return "`fenec nodes`"
	case method == "PUT" && words == "nodes" && last == "":
		return "`fenec register $FENEC_ROUTER --name " + name + " --addr NODE_URL`"
	case method == "DELETE" && words == "nodes" && last == "":
		return "`fenec nodes rm " + name + "`"
	case method == "POST" && words == "nodes" && last == "failover":
		return "`fenec failover " + name + "`"
	case method == "GET" && words == "tenants" && last == "":
		return "`fenec tenants`"
	case method == "PUT" && words == "tenants" && last == "":
		return "`fenec place " + name + "`"
	case method == "POST" && words == "tenants" && last == "move":
		return "`fenec move " + name + " --to NODE`"
	case method == "PUT" && words == "tenants" && last == "survive":
		if strings.Contains(body, `"zone"`) {
			return "`fenec survive " + name + " zone`"
		}
		return "`fenec survive " + name + " region`"
	case method == "PUT" && words == "tenants" && last == "read-copies":
		return "`fenec read-copies " + name + " NODE...`"
	case words == "tenants" && last == "quota":
		return "`fenec quota " + name + "`"
	case method == "GET" && words == "tenants" && last == "file":
		return "`fenec backup " + name + "`"
	case method == "PUT" && words == "tenants" && last == "file":
		return "`fenec restore " + name + "`"
	case method == "GET" && words == "regions":
		return "`fenec regions`"
	case method == "POST" && words == "regions" && last == "handoff":
		to := "global"
		if strings.Contains(body, `"region"`) {
			to = "region"
		}
		return "`fenec handoff " + name + " --to " + to + "`"
	case method == "POST" && words == "promote":
		return "`fenec promote`"
	case method == "POST" && words == "replicas":
		return "`fenec replicas`"
	case method == "POST" && words == "query":
		return "`fenec query`"
	case method == "GET" && words == "leases":
		return "`fenec leases`"
	}
	return ""
}
