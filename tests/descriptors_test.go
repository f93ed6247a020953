package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fenec-go/fenec/tests/cluster"
)

// descriptorLimit is the node's descriptor limit in the test: small, so
// that strangers reach it in a second.
const descriptorLimit = 512

// Strangers from several addresses open idle connections to a node whose
// descriptor limit is small, each holding all it will take: the node,
// started on its defaults, keeps its descriptors for its tenant files and
// its router. The strangers' connections past their bounds are refused
// 429 (an address's share) or 503 (the node's total, lowered at start
// below the descriptor limit), while every write through the router
// lands, new tenants open their files, the router's grants keep renewing
// the node's lease, and the node never fails for want of a descriptor.
func TestStrangersCannotTakeANodesDescriptors(t *testing.T) {
	c := cluster.New(t)
	r := c.StartRouter("router", cluster.RouterOptions{Args: []string{"--auto-failover", leaseSecs, "--upstream-timeout", "5"}})
	n1 := c.StartNode("n1", cluster.NodeOptions{NoFile: descriptorLimit,
		Args: []string{"--lease", "--sync", "always", "--http-token", dataToken}})
	r.Register(n1)
	waitLeased(t, r, "n1")
	if !strings.Contains(n1.Proc.Log(), "--max-conns lowered") {
		t.Errorf("the node did not say it lowered --max-conns to its descriptor limit:\n%s", n1.Proc.Log())
	}
	good := cluster.NewClient(t, r.URL(), dataToken)
	const tenants = 24
	for i := range tenants {
		name := fmt.Sprintf("d%d", i)
		r.Place(name, n1)
		if i < tenants/2 {
			good.MustQuery(name, "create collection kv (k text @unique, v int)")
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	since := time.Now()
	var held, refused429, refused503 int
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for range 300 {
			conn, err := dialFrom(ctx, n1.Direct(), ip)
			if err != nil {
				continue
			}
			conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			head := make([]byte, 12)
			k, err := io.ReadFull(conn, head)
			switch {
			case k == 0 && errors.Is(err, os.ErrDeadlineExceeded):
				conn.SetReadDeadline(time.Time{})
				held++ // closed by cancel
			case string(head) == "HTTP/1.1 429":
				refused429++
				conn.Close()
			case string(head) == "HTTP/1.1 503":
				refused503++
				conn.Close()
			default:
				conn.Close()
				t.Fatalf("a stranger's connection from %s was answered %q (%v)", ip, head[:k], err)
			}
		}
	}
	t.Logf("strangers: %d connections held, %d refused 429, %d refused 503", held, refused429, refused503)
	if held >= descriptorLimit*3/4 || refused429 == 0 || refused503 == 0 {
		t.Fatalf("strangers held %d connections of a node with %d descriptors (refused 429: %d, 503: %d)",
			held, descriptorLimit, refused429, refused503)
	}

	// Under them, every write lands: on tenants open before, and on
	// tenants whose files the node opens now.
	for i := range tenants {
		name := fmt.Sprintf("d%d", i)
		if i >= tenants/2 {
			if res := good.Query(name, "create collection kv (k text @unique, v int)"); res.Err != nil || res.Status != 200 {
				t.Fatalf("create in %s while strangers hold connections: %s", name, res)
			}
		}
		for j := range 5 {
			if res := good.Query(name, "insert kv {k: $1, v: $2}", fmt.Sprintf("k%d", j), j); res.Err != nil || res.Status != 200 {
				t.Fatalf("write to %s while strangers hold connections: %s", name, res)
			}
		}
	}
	for i := range tenants {
		name := fmt.Sprintf("d%d", i)
		if rows := good.MustQuery(name, "get kv").Rows(t); len(rows) != 5 {
			t.Fatalf("%s holds %d rows, want the 5 acknowledged", name, len(rows))
		}
	}
	stillLeased(t, r, "n1", since)
	if log := n1.Proc.Log(); strings.Contains(log, "too many open files") {
		t.Fatalf("the node ran out of descriptors:\n%s", log)
	}
}
