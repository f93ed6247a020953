package tests

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// A region's leading router started with --global mirrors the region's
// records from the global directory into its own, and the region's
// routers forward from that copy: the region's tenants answer through
// them, another region's do not exist there, changes are refused there
// saying where to send them, and with the global tier's router (and its
// directory) stopped the region goes on forwarding reads and writes. A
// tenant placed once the global tier is back reaches the region's copy.
func TestRegionForwardsFromItsCopy(t *testing.T) {
	c := cluster.New(t)
	g := c.StartRouter("global", cluster.RouterOptions{})
	local := c.StartRouter("local", cluster.RouterOptions{Args: []string{"--region", "local", "--global", g.EtcdURL()}})
	fw := c.StartRouter("local-fw", cluster.RouterOptions{Directory: local.EtcdURL(), Args: []string{"--standby"}})
	n1 := c.StartNode("n1", cluster.NodeOptions{})
	n2 := c.StartNode("n2", cluster.NodeOptions{})
	g.Register(n1)
	wantStatus(t, g.Client().Do("PUT", "/_shard/nodes/n2", map[string]any{
		"addr": n2.URL(), "token": cluster.AdminToken, "region": "far",
	}), 201, "record n2 in region far")
	g.Place("near", n1)
	g.Place("away", n2)
	g.Client().MustQuery("near", "create collection kv (k text @unique, v int)")

	for _, r := range []*cluster.Router{local, fw} {
		cl := r.Client()
		cluster.Eventually(t, wait, func() error {
			if res := cl.Query("near", "put kv {k: $1, v: 1}", r.Name); res.Status != 200 {
				return fmt.Errorf("write on near through %s: %s", r.Name, res)
			}
			return nil
		})
		if res := cl.Query("away", "get kv"); res.Status != 404 {
			t.Fatalf("another region's tenant through %s: %s", r.Name, res)
		}
	}
	for _, r := range []*cluster.Router{g, local} {
		var regions []struct {
			Name     string `json:"name"`
			Leaser   string `json:"leaser"`
			Nodes    int    `json:"nodes"`
			Mirrored bool   `json:"mirrored"`
		}
		res := r.Client().Do("GET", "/_shard/regions", nil)
		if res.Status != 200 || json.Unmarshal(res.Body, &regions) != nil {
			t.Fatalf("regions through %s: %s", r.Name, res)
		}
		want := fmt.Sprintf("[{far global 1 false} {local global 1 %v}]", r == local)
		if r == local {
			want = "[{local global 1 true}]" // the copy holds its own region only
		}
		if got := fmt.Sprint(regions); got != want {
			t.Fatalf("regions through %s: %s, want %s", r.Name, got, want)
		}
	}
	res := local.Client().Do("PUT", "/_shard/tenants/x", map[string]any{"node": "n1"})
	if res.Status != 409 || !strings.Contains(string(res.Body), "global tier") {
		t.Fatalf("a change on the mirroring router: %s", res)
	}

	g.Stop()
	for i := range 10 {
		for _, r := range []*cluster.Router{local, fw} {
			cl := r.Client()
			if res := cl.Query("near", "put kv {k: $1, v: $2}", fmt.Sprintf("%s-%d", r.Name, i), i); res.Status != 200 {
				t.Fatalf("write %d through %s with the global tier down: %s", i, r.Name, res)
			}
		}
	}
	got := local.Client().Query("near", "get kv count")
	if got.Status != 200 || !strings.Contains(string(got.Body), `"count":22}`) {
		t.Fatalf("count through the region with the global tier down: %s", got)
	}

	g.Restart()
	g.Place("later", n1)
	cluster.Eventually(t, wait, func() error {
		if res := local.Client().Query("later", "create collection if not exists c (x int)"); res.Status != 200 {
			return fmt.Errorf("a tenant placed after the global tier came back, through the region: %s", res)
		}
		return nil
	})
}

// A region's router forwarding by its copy sees the global tier's
// failover as soon as the copy shows it: a writer through the region's
// router, its node killed, writes again on the promoted copy, and every
// write it was answered is there.
func TestRegionSeesGlobalFailover(t *testing.T) {
	c := cluster.New(t)
	g := c.StartRouter("global", cluster.RouterOptions{Args: []string{"--auto-failover", leaseSecs, "--upstream-timeout", "5"}})
	local := c.StartRouter("local", cluster.RouterOptions{Args: []string{"--region", "local", "--global", g.EtcdURL(), "--upstream-timeout", "5"}})
	n1, n2 := standbyPair(t, c, g)
	kvTenant(t, g, "w", n1, 1)
	caughtUp(t, "w", n1, n2)
	via := local.Client()
	cluster.Eventually(t, wait, func() error {
		if res := via.Do("PATCH", "/t/w/kv?k=eq.k0", `{"v": 0}`); res.Status != 200 {
			return fmt.Errorf("write through the region: %s", res)
		}
		return nil
	})

	n1.Kill()
	killed := time.Now()
	last, resumed := 0, time.Duration(0)
	for i := 1; time.Since(killed) < wait; i++ {
		res := via.Do("PATCH", "/t/w/kv?k=eq.k0", fmt.Sprintf(`{"v": %d}`, i), "Idempotency-Key", "w-"+strconv.Itoa(i))
		if res.Status == 200 {
			last = i
			if placement(t, g.Client(), "w")["node"] == "n2" {
				resumed = time.Since(killed)
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resumed == 0 {
		t.Fatal("the region's writer never wrote on the promoted copy")
	}
	t.Logf("the region's writer wrote on n2 %v after n1's kill", resumed)
	// The last answered write, or one sent after it whose answer was
	// lost, is what the promoted copy holds: never an earlier one.
	got := via.Do("GET", "/t/w/kv?k=eq.k0&select=v", nil)
	var rows []struct {
		V int `json:"v"`
	}
	if got.Status != 200 || json.Unmarshal(got.Body, &rows) != nil || len(rows) != 1 || rows[0].V < last {
		t.Fatalf("after the failover the region reads %s, the last answered write set %d", got, last)
	}
}
