package leasing

import (
	"context"
	"fmt"
	"time"

	"github.com/fenec-go/fenec/global"
)

// probeRetry is how long a node whose lease probe went unanswered waits
// before it is asked again; noLeaseReprobe, one that said it takes none
// (it may be restarted with --lease at the same address).
const (
	probeRetry     = 2 * time.Second
	noLeaseReprobe = 30 * time.Second
)

// probe is what asking a node at addr whether it takes leases found.
type probe struct {
	addr    string
	decided bool          // its record was set lease:true
	none    bool          // the node said it takes no lease
	retryAt time.Duration // not decided: ask again then (leasing's clock)
	running bool
}

// probeNodes asks nodes recorded without lease:true whether they take
// leases, each once per address, and records lease:true for those that
// do. Only the leader writes the record.
func (l *Leasing) probeNodes(v *global.View) {
	now := l.deps.Clock.Now()
	var ask []string
	l.mu.Lock()
	for name, n := range v.Nodes() {
		if n.Lease {
			continue
		}
		p, ok := l.probes[name]
		if ok && p.addr == n.Addr && (p.decided || p.running || now < p.retryAt) {
			continue
		}
		l.probes[name] = probe{addr: n.Addr, running: true, none: ok && p.addr == n.Addr && p.none}
		ask = append(ask, name)
	}
	l.mu.Unlock()
	for _, name := range ask {
		n, _ := v.Node(name)
		// The leasing's context, not the caller's: a forwarded request
		// that synced the lists may end before the probe does.
		l.goCtx(func(ctx context.Context) { l.probeNode(ctx, name, n) })
	}
}

// probeNode asks one node and records what it said.
func (l *Leasing) probeNode(ctx context.Context, name string, n global.Node) {
	pctx, cancel := context.WithTimeout(ctx, max(l.deps.Own/3, time.Second))
	defer cancel()
	takes, err := l.deps.Probe(pctx, n)
	if err == nil && takes {
		err = l.recordTakesLease(pctx, name, n.Addr)
	}
	p := probe{addr: n.Addr, decided: err == nil && takes, none: err == nil && !takes}
	now := l.deps.Clock.Now()
	switch {
	case err != nil:
		p.retryAt = now + probeRetry
		l.log.Debug("lease probe", "node", name, "err", err)
	case !takes:
		p.retryAt = now + noLeaseReprobe
	}
	l.mu.Lock()
	if p.none && !l.probes[name].none {
		l.log.Info("node takes no lease: it is never failed over automatically", "node", name)
	}
	l.probes[name] = p
	l.mu.Unlock()
	l.Poke()
}

// recordTakesLease sets lease:true on node name's record, if it still has
// addr.
func (l *Leasing) recordTakesLease(ctx context.Context, name, addr string) error {
	s, err := l.deps.Lead.Changes(ctx)
	if err == nil && l.deps.OwnNode != nil {
		s, err = l.deps.OwnNode(ctx, s, name)
	}
	if err != nil {
		return err
	}
	mark := func(n *global.Node, _ bool) bool {
		if n.Addr != addr || n.Lease {
			return false
		}
		n.Lease = true
		return true
	}
	rev, err := s.WriteNode(ctx, name, false, mark)
	if err != nil {
		l.deps.Lead.Lost(ctx, err)
		return fmt.Errorf("record %s takes leases: %w", name, err)
	}
	if rev == 0 {
		return nil
	}
	l.deps.Settle(ctx, rev)
	l.log.Info("node takes leases", "node", name)
	return nil
}
