package forward

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/internal/forwarded"
)

// The forwarder names the client to the node beside the proof of the
// node's admin token, and drops whatever a client sent under those names:
// a client can neither forge them nor see the proof. With no token for the
// node it sends neither.
func TestForwardNamesTheClientWithProof(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{
		"acme": {Node: "n1", Addr: node.addr(), Token: "adm"},
		"open": {Node: "n1", Addr: node.addr()},
	})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)
	forged := "Fenec-Client: 198.51.100.7\r\nfenec-router-proof: " + forwarded.Proof("adm") + "\r\nFENEC-CLIENT: 10.9.9.9\r\n"
	for i, tenant := range []string{"acme", "open"} {
		resp, body := rc.send(t, "GET", "GET /t/"+tenant+"/c HTTP/1.1\r\nHost: x\r\n"+forged+"\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tenant, resp.StatusCode, body)
		}
		for _, h := range []string{forwarded.HeaderClient, forwarded.HeaderProof} {
			if v := resp.Header.Values(h); len(v) != 0 {
				t.Fatalf("%s: the client was shown %s %q", tenant, h, v)
			}
		}
		s := node.requests()[i]
		client, proof := s.Header.Values(forwarded.HeaderClient), s.Header.Values(forwarded.HeaderProof)
		if tenant == "open" {
			if len(client)+len(proof) != 0 {
				t.Fatalf("no token: the node saw client %q proof %q", client, proof)
			}
			continue
		}
		if len(client) != 1 || client[0] != "127.0.0.1" || len(proof) != 1 || proof[0] != forwarded.Proof("adm") {
			t.Fatalf("the node saw client %q proof %q", client, proof)
		}
	}
}

// The router forwards no tenant's replication feed, however the path is
// spelled; it says the feed is served by nodes to their copies. Paths that
// only look like it are forwarded.
func TestReplicationFeedNotForwardedUnit(t *testing.T) {
	node := newRecorder(t, nil)
	place := newPlacements(map[string]Target{"acme": {Node: "n1", Addr: node.addr(), Token: "adm"}})
	r := newRouter(t, place, fwdOpts{})
	rc := dialRaw(t, r.url)
	for _, target := range []string{
		"/t/acme/_replication", "/t/acme/_replication?since=0&history=1", "/t/acme/_replication/",
		"/t/acme/%5Freplication", "/t/acme/_%72eplication",
	} {
		for _, method := range []string{"GET", "HEAD", "POST"} {
			resp, body := rc.send(t, method, method+" "+target+" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
			var e map[string]string
			if resp.StatusCode != 404 || method != "HEAD" && (json.Unmarshal(body, &e) != nil || !strings.Contains(e["error"], "replication feed")) {
				t.Fatalf("%s %s: %d %s", method, target, resp.StatusCode, body)
			}
		}
	}
	if n := node.count(); n != 0 {
		t.Fatalf("the node saw %d requests", n)
	}
	for _, target := range []string{"/t/acme/_replicationx", "/t/acme/c/_replication", "/t/acme/_changes"} {
		if resp, body := rc.send(t, "GET", "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", target, resp.StatusCode, body)
		}
	}
}
