package tests

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/tests/cluster"
)

// metricName is a series name as the alert rules and the dashboard write
// one (recording rules, which have a colon, are no scraped series).
var metricName = regexp.MustCompile(`\b(?:fenec|go|process)_[a-z0-9_]+\b`)

// namedIn reads every metric name a file names.
func namedIn(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := metricName.FindAllString(string(b), -1)
	slices.Sort(names)
	return slices.Compact(names)
}

// scrape reads the names of the series a server's /_metrics exposes, and
// of the metrics they belong to (a histogram's name, beside its _bucket,
// _sum and _count series).
func scrape(t *testing.T, c *cluster.Client, into, families map[string]bool) {
	t.Helper()
	res := c.Do("GET", "/_metrics", nil)
	if res.Status != 200 {
		t.Fatalf("metrics of %s: %s", c.Base(), res)
	}
	sc := bufio.NewScanner(strings.NewReader(string(res.Body)))
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(f, " ")
			families[name] = true
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		into[name] = true
	}
}

// TestAlertsAndDashboardNameRealMetrics: every series the alert rules and
// the Grafana dashboard name is exposed by a running leasing router, a
// router mirroring its region, or a leased node with a copy — so a renamed
// metric breaks this test, not an operator's alert — and every fenec_
// metric they expose is listed in docs/metrics.md.
func TestAlertsAndDashboardNameRealMetrics(t *testing.T) {
	c := cluster.New(t)
	g := c.StartRouter("global", cluster.RouterOptions{Args: []string{"--auto-failover", "1"}})
	region := c.StartRouter("region", cluster.RouterOptions{Args: []string{"--region", "local", "--global", g.EtcdURL()}})
	n1, n2 := standbyPair(t, c, g)
	kvTenant(t, g, "m", n1, 3)
	caughtUp(t, "m", n1, n2)
	cluster.Eventually(t, wait, func() error {
		if res := region.Client().Query("m", "get kv count"); res.Status != 200 {
			return fmt.Errorf("m through the region: %s", res)
		}
		return nil
	})
	wantError(t, g.Client().Query("nosuch", "get kv"), 404, "an unknown tenant, for a 4xx")
	// A node without --lease, killed under its tenant: a 502 and an
	// upstream error, which no automatic failover hides.
	n3 := c.StartNode("n3", cluster.NodeOptions{})
	g.Register(n3)
	g.Place("u", n3)
	n3.Kill()
	wantError(t, g.Client().Query("u", "get kv"), 502, "a tenant whose node was killed")

	exposed, families := map[string]bool{}, map[string]bool{}
	for _, cl := range []*cluster.Client{g.Client(), region.Client(), n1.Admin(), n2.Admin()} {
		scrape(t, cl, exposed, families)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range families {
		if strings.HasPrefix(name, "fenec_") && !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not list %s", name)
		}
	}
	for _, file := range []string{"../deploy/prometheus/alerts.yml", "../deploy/grafana/fenec.json"} {
		names := namedIn(t, file)
		if len(names) < 10 {
			t.Fatalf("%s names %d metrics: the pattern matches nothing there", file, len(names))
		}
		for _, name := range names {
			if !exposed[name] {
				t.Errorf("%s names %s, which no running node or router exposes", file, name)
			}
		}
	}
}
