package benchkit

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/fenec-go/fenec/tests/dnsstub"
)

// Sides is two regions on one machine with a wide-area link between
// them: each region looks node names up at a name server of its own,
// which names a node of its own region 127.0.0.1 (the node itself) and a
// node of the other 127.0.0.2, where a WANLink of the run's delay listens
// on the node's port in front of it. So whatever a process of one region
// sends to a node of the other crosses the link, by name, as deployed.
type Sides struct {
	delay   time.Duration
	regions [2]string
	dns     [2]*dnsstub.Server
	links   []*WANLink
}

// StartSides starts the name servers of regions a and b.
func StartSides(delay time.Duration, a, b string) (*Sides, error) {
	s := &Sides{delay: delay, regions: [2]string{a, b}}
	for i := range s.dns {
		d, err := dnsstub.Start()
		if err != nil {
			s.Close()
			return nil, err
		}
		s.dns[i] = d
	}
	return s, nil
}

// Resolver is the address of region's name server (a process's
// --resolver).
func (s *Sides) Resolver(region string) string { return s.dns[s.side(region)].Addr() }

func (s *Sides) side(region string) int {
	if region == s.regions[1] {
		return 1
	}
	return 0
}

// Link starts a WANLink of the run's delay on listen in front of target.
func (s *Sides) Link(listen, target string) (*WANLink, error) {
	l, err := StartWAN(listen, target, s.delay)
	if err != nil {
		return nil, err
	}
	s.links = append(s.links, l)
	return l, nil
}

// Publish names the node listening on addr (127.0.0.1:port) of region as
// name.bench.test: at home as itself, in the other region through a link
// on 127.0.0.2 and the same port. It answers the node's URL by that name.
func (s *Sides) Publish(name, region, addr string) (string, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if _, err := s.Link("127.0.0.2:"+port, addr); err != nil {
		return "", fmt.Errorf("the link in front of %s: %w", name, err)
	}
	host := name + ".bench.test"
	home := s.side(region)
	s.dns[home].Set(host, netip.MustParseAddr("127.0.0.1"))
	s.dns[1-home].Set(host, netip.MustParseAddr("127.0.0.2"))
	return "http://" + net.JoinHostPort(host, port), nil
}

// StartNode starts the node binary nodeBin of region serving dir, which
// looks names up at region's name server, with adminToken and args after
// it, and publishes it as name. It answers the process, the node's own
// address and its URL by name.
func (s *Sides) StartNode(nodeBin, dir, name, region, adminToken string, args ...string) (p *Proc, addr, url string, err error) {
	args = append(args, "--resolver", s.Resolver(region))
	if p, addr, err = StartNodeProc(nodeBin, dir, "fenec-node "+name, adminToken, args...); err != nil {
		return nil, "", "", fmt.Errorf("node %s: %w", name, err)
	}
	if url, err = s.Publish(name, region, addr); err != nil {
		p.Stop()
		return nil, "", "", err
	}
	return p, addr, url, nil
}

// Close stops every link and name server. Safe twice.
func (s *Sides) Close() {
	for _, l := range s.links {
		l.Close()
	}
	s.links = nil
	for i, d := range s.dns {
		if d != nil {
			d.Close()
			s.dns[i] = nil
		}
	}
}

// WaitFor calls fn until it returns nil, for at most limit, and answers
// its last error.
func WaitFor(limit time.Duration, fn func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// QueryBody is the body of a /query request for statement q.
func QueryBody(q string) string {
	b, _ := json.Marshal(map[string]string{"query": q})
	return string(b)
}

// Commit names the checkout measured: its commit, and whether its files
// differ from it.
func Commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " (with changes not committed)"
	}
	return c
}

// WaitLeased waits, for at most limit, until the router at base runs a
// lease on every named node.
func WaitLeased(c *http.Client, base string, limit time.Duration, nodes ...string) error {
	return WaitFor(limit, func() error {
		var a struct {
			Nodes []struct {
				Node   string `json:"node"`
				Ran    bool   `json:"ran"`
				LeftMS int64  `json:"left_ms"`
			} `json:"nodes"`
		}
		if err := CallJSON(c, "GET", base+"/_shard/leases", "", "", 200, &a); err != nil {
			return err
		}
		for _, want := range nodes {
			leased := false
			for _, n := range a.Nodes {
				leased = leased || (n.Node == want && n.Ran && n.LeftMS > 0)
			}
			if !leased {
				return fmt.Errorf("%s not leased by %s", want, base)
			}
		}
		return nil
	})
}
