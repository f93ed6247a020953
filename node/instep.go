package node

import (
	"maps"
	"slices"
	"sync"

	"github.com/fenec-go/fenec/lease"
)

// Copies in step. Under --lease and --sync always the leasing router's
// list says which tenants' copies the directory counts on holding every
// write the node answers. A write (or a read showing one) on such a tenant
// is answered only once a copy holds it. A copy that makes one wait out
// replicaWait is not dropped on the node's say-so, as it is for a tenant
// nobody counts on: the node asks, in its grant answers, that the copy be
// recorded behind, and holds the write until a list taken after the ask
// has it so (the router records it before it lists it, and no failover
// promotes a copy recorded behind unless forced). So no failover loses a
// write the node answered, the copy being cut off from the node alone as
// much as the node itself. A copy recorded behind that has caught up is
// said so in the answers; from then on the node waits for it as for one
// in step until the list has it in step again. Here is what the lists
// say; the wait itself is settle.go's (waitInStep).

// steps is the node's side of it (guarded by mu).
type steps struct {
	mu sync.Mutex
	// asking: tenant -> the seq the node stood at when it first asked for
	// its copy to be recorded behind, until a list records it at or past.
	asking map[string]uint64
	// claimed: tenants whose copy the node said caught up, waited for as
	// in step until the list has them in step.
	claimed map[string]bool
	// changed is closed and replaced whenever a list is taken.
	changed chan struct{}
	// caughtUp says whether tenant's copy following as replica ("": any)
	// holds everything the tenant has durable and is waited for (the
	// server sets it).
	caughtUp func(tenant, replica string) bool
}

func newSteps() *steps {
	return &steps{asking: map[string]uint64{}, claimed: map[string]bool{}, changed: make(chan struct{})}
}

// taken is the lease handler's OnTaken: a list taken ends the asks it
// records and the claims it has in step, and wakes the writes waiting.
func (s *steps) taken(st lease.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, at := range s.asking {
		if got, ok := st.Behind[t]; ok && got >= at {
			delete(s.asking, t)
		}
		if _, listed := slices.BinarySearch(st.Tenants, t); !listed {
			delete(s.asking, t) // no longer this node's to write
		}
	}
	for t := range s.claimed {
		_, inStep := slices.BinarySearch(st.InStep, t)
		_, listed := slices.BinarySearch(st.Tenants, t)
		if inStep || !listed {
			delete(s.claimed, t)
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// report is the lease handler's Report: the asks still open, and the
// copies the list has behind that have caught up (claimed from here on).
func (s *steps) report(l *lease.NodeLease) (map[string]uint64, []string) {
	behindList := l.BehindList()
	var caught []string
	for _, t := range behindList {
		if s.caughtUp != nil && s.caughtUp(t, l.Step(t).Replica) {
			caught = append(caught, t)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range caught {
		if _, asking := s.asking[t]; !asking {
			s.claimed[t] = true
		}
	}
	caught = slices.DeleteFunc(caught, func(t string) bool { return !s.claimed[t] })
	var behind map[string]uint64
	if len(s.asking) > 0 {
		behind = maps.Clone(s.asking)
	}
	return behind, caught
}

// required says whether a write on tenant must wait for a copy however
// long (until the list releases it), and which (the replica's node, ""
// for any), and returns the channel a list taken closes.
func (s *steps) required(l *lease.NodeLease, tenant string) (bool, string, <-chan struct{}) {
	st := l.Step(tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, asking := s.asking[tenant]
	return st.InStep || asking || s.claimed[tenant], st.Replica, s.changed
}

// ask asks for tenant's copy to be recorded behind, at seq, unless an ask
// is open.
func (s *steps) ask(tenant string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.asking[tenant]; !ok {
		s.asking[tenant] = seq
	}
}

// copyCaughtUp says whether a voting copy streaming from this file under the name
// replica (any for "") holds all the file had durable when its stream
// last caught up, and is waited for.
func (t *tenant) copyCaughtUp(replica string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for f := range t.feeds {
		if !f.read && (replica == "" || f.copy == replica) && !f.lagging && f.sentAll != noneSent && f.acked >= f.sentAll {
			return true
		}
	}
	return false
}
