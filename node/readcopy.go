package node

// Read copies: copies that follow with role=read are never promoted and
// never counted as holding a write, and are sent only what the tenant has
// committed — what a read on the primary may show without waiting — so a
// read copy never shows a write a failover could take back.

import (
	"context"
	"io"
	"os"
	"time"
)

// commitPoint is how far a read copy of c's tenant may be sent now, and
// what wakes a wait for it to move on besides the file's durable seq (an
// ack of a copy, a list taken; nil: none).
//
// Under --sync always it is what every voting copy a write waits for has
// acknowledged (those lagging left out, as a write leaves them), and, on
// a tenant whose lease list counts on a copy in step, what that copy
// acknowledged — the most a failover may promote without losing an
// answered write; never past the file's durable seq. Under any other
// --sync no write waits for a copy, and it is the durable seq.
func (c *call) commitPoint() (uint64, <-chan struct{}, <-chan struct{}) {
	t := c.t
	point := t.db.Durable()
	if !c.s.syncAlways {
		return point, nil, nil
	}
	var (
		need    bool
		replica string
		listed  <-chan struct{}
	)
	if nl := c.s.lease; nl != nil && nl.lease != nil {
		need, replica, listed = nl.steps.required(nl.lease, t.name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var named uint64 // the most the copy counted on holds
	for f := range t.feeds {
		if f.read {
			continue
		}
		if !f.lagging {
			point = min(point, f.acked)
		}
		if replica == "" || f.copy == replica {
			named = max(named, f.acked)
		}
	}
	if need {
		point = min(point, named)
	}
	return point, t.sentCh, listed
}

// sendCommittedImage sends a read copy the whole tenant once all of it is
// committed: the image is written aside first (its position is at most
// the seq read after it), and sent once the commit point reached that seq.
// Until then the copy is sent keepalives.
func (c *call) sendCommittedImage(fw *frameWriter) {
	t := c.t
	tmp, err := os.CreateTemp(c.s.reg.dir, t.name+imagePartMark+"*.part") // removeStaged's at a restart
	if err != nil {
		c.log.Error("replication image for a read copy", "tenant", t.name, "err", c.s.pathless(err))
		return
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if _, err := t.db.WriteImage(tmp); err != nil {
		c.log.Error("replication image for a read copy", "tenant", t.name, "err", c.s.pathless(err))
		return
	}
	if err := c.awaitCommitted(fw, t.db.Seq()); err != nil {
		c.log.Debug("replication image for a read copy not sent", "tenant", t.name, "err", err)
		return
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		c.log.Error("replication image for a read copy", "tenant", t.name, "err", c.s.pathless(err))
		return
	}
	// Hidden from io.Copy's WriteTo, so the frames are imageChunk long.
	if _, err := io.CopyBuffer(fw, struct{ io.Reader }{tmp}, make([]byte, imageChunk)); err != nil {
		return
	}
	c.endImage(fw)
}

// awaitCommitted waits until the commit point reaches seq, sending
// keepalives meanwhile; an error when the copy, the tenant or the node
// goes first.
func (c *call) awaitCommitted(fw *frameWriter, seq uint64) error {
	t := c.t
	keep := time.NewTicker(c.s.cfg.KeepAlive)
	defer keep.Stop()
	for {
		moved := t.db.DurableMoved()
		point, acked, listed := c.commitPoint()
		if point >= seq {
			return nil
		}
		select {
		case <-moved:
		case <-acked:
		case <-listed:
		case <-keep.C:
			if err := fw.frame(frameKeep); err != nil {
				return err
			}
			if err := fw.flush(); err != nil {
				return err
			}
		case <-c.r.Context().Done():
			return context.Cause(c.r.Context())
		case <-t.ctx.Done():
			return context.Cause(t.ctx)
		case <-c.s.stopping:
			return ErrShuttingDown
		}
	}
}
