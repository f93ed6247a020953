package node

import "time"

// janitor closes idle tenants and keeps memory under the ceiling.
func (r *registry) janitor() {
	tick := min(max(r.idleClose/4, 10*time.Millisecond), 5*time.Second)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-ticker.C:
			r.closeIdle()
			r.fitMemory()
		case <-r.kick:
			r.fitMemory()
		}
	}
}

// takeIdleLocked marks t closing if nothing holds it.
func (r *registry) takeIdleLocked(t *tenant) bool {
	if t.closing || t.refs > 0 || !isClosed(t.ready) || t.openErr != nil {
		return false
	}
	t.closing = true
	return true
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closeIdle closes the tenants untouched for idleClose.
func (r *registry) closeIdle() {
	cut := r.now().Add(-r.idleClose)
	var idle []*tenant
	r.mu.Lock()
	for _, t := range r.tenants {
		if t.lastUsed.Before(cut) && r.takeIdleLocked(t) {
			idle = append(idle, t)
		}
	}
	r.mu.Unlock()
	for _, t := range idle {
		r.closeOut(t, "idle")
	}
}

// fitMemory closes idle tenants, least recently used first, while the
// open ones together hold more than the ceiling.
func (r *registry) fitMemory() {
	if r.maxMemory <= 0 {
		return
	}
	for {
		r.mu.Lock()
		var total int64
		var lru *tenant
		for _, t := range r.tenants {
			if t.closing || !isClosed(t.ready) || t.openErr != nil {
				continue
			}
			total += t.mem.Load()
			if t.refs == 0 && (lru == nil || t.lastUsed.Before(lru.lastUsed)) {
				lru = t
			}
		}
		if total <= r.maxMemory || lru == nil {
			r.mu.Unlock()
			return
		}
		r.takeIdleLocked(lru)
		r.mu.Unlock()
		r.closeOut(lru, "memory")
	}
}

// closeOut closes a tenant taken by takeIdleLocked: one idle is
// checkpointed where that gains; one closed for memory is not (a
// checkpoint's snapshot would add to what it closes to give back).
func (r *registry) closeOut(t *tenant, why string) {
	if err := r.closeTenant(t, why == "idle"); err != nil {
		r.log.Error("close tenant", "tenant", t.name, "why", why, "err", err)
	} else {
		r.log.Debug("tenant closed", "tenant", t.name, "why", why)
	}
	r.forget(t)
}
