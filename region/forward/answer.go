package forward

import (
	"io"
	"net/http"
	"net/http/httputil"
	"time"
)

// answer passes the node's answer back: one with a length (or no body)
// whole, after which the connection goes back to the pool; one without
// copied as it arrives. An answer that ends short once its head went to
// the client was cut by its client (gone, or cut for not reading: 499)
// or by its node (its own bounds on a reader, its answer budget, its
// tenant or itself going, or a failure midway); either is counted as a
// cut answer, never as an upstream error: the node answered, and a node
// that is really gone fails the next request's connection and its lease.
func (f *Forwarder) answer(w http.ResponseWriter, x *exchange, p *pool, pc *pconn, tgt Target) (result, int, Target) {
	h, fl := &x.hd, &x.fl
	if !h.noBody && h.length < 0 {
		if !fl.enter(phaseStream, nil) {
			pc.close()
			return f.ended(fl, true, x)
		}
		return resDone, f.stream(w, x, p, pc, tgt), Target{}
	}
	if !fl.enter(phaseAnswer, nil) {
		pc.close()
		return f.ended(fl, true, x)
	}
	h.fill(w.Header())
	x.servedBy(w.Header())
	w.WriteHeader(h.status)
	if !h.noBody && h.length > 0 {
		x.lr = io.LimitedReader{R: pc.br, N: h.length}
		x.cw = clientWriter{w: w}
		buf := streamBufs.Get().(*[]byte)
		n, err := io.CopyBuffer(&x.cw, &x.lr, *buf)
		streamBufs.Put(buf)
		x.lr.R = nil
		failed := x.cw.err != nil
		x.cw = clientWriter{}
		if err != nil || n != h.length {
			pc.close()
			if _, gone, _ := fl.state(); gone || failed || x.r.Context().Err() != nil {
				f.metrics.answerCut(cutByClient)
				return resDone, statusClient, Target{}
			}
			f.metrics.answerCut(cutByNode)
			return resDone, aborted(h.status), Target{}
		}
	}
	f.reuse(fl, p, pc, tgt, h.close)
	return resDone, h.status, Target{}
}

// clientWriter is the client's side of an answer's copy: it keeps the
// error of a write, so a client that went or stopped reading (cut by the
// write gap, h1.Server) is told from a node that failed midway.
type clientWriter struct {
	w   io.Writer
	err error
}

func (c *clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

// reuse gives a connection whose exchange ended cleanly back to the pool,
// once the attempt's flight has let go of it: a connection belongs to one
// request or to the pool, never both.
func (f *Forwarder) reuse(fl *flight, p *pool, pc *pconn, tgt Target, closing bool) {
	if !fl.letGo() || closing {
		pc.close()
		return
	}
	// The deadline stays: the next request to take it sets its own
	// before anything is read or written (takeIdle).
	p.put(pc, dialAddr(tgt.Addr), f.now(), f.cfg.MaxIdlePerNode)
}

// stream copies an answer without a length as it arrives, flushing each
// write, until either side closes. The upstream timeout no longer applies.
func (f *Forwarder) stream(w http.ResponseWriter, x *exchange, p *pool, pc *pconn, tgt Target) int {
	h := &x.hd
	_ = pc.c.SetDeadline(time.Time{})
	h.fill(w.Header())
	x.servedBy(w.Header())
	w.WriteHeader(h.status)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	var body io.Reader = pc.br // close-delimited: until the node closes
	if h.chunked {
		body = httputil.NewChunkedReader(pc.br)
	}
	buf := streamBufs.Get().(*[]byte)
	defer streamBufs.Put(buf)
	for {
		n, err := body.Read(*buf)
		if n > 0 {
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				pc.close()
				f.metrics.answerCut(cutByClient)
				return statusClient
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == io.EOF {
			f.reuse(&x.fl, p, pc, tgt, !h.chunked || h.close || !skipTrailer(pc))
			return h.status
		}
		if err != nil {
			pc.close()
			cut, gone, _ := x.fl.state()
			switch {
			case gone || x.r.Context().Err() != nil:
				f.metrics.answerCut(cutByClient)
				return statusClient
			case cut:
				f.metrics.cut(CutStreamEnded)
			default:
				f.metrics.answerCut(cutByNode)
			}
			return aborted(h.status)
		}
	}
}

// skipTrailer reads what follows a chunked body's last chunk (trailer
// lines, then an empty line); false if the connection cannot be reused.
func skipTrailer(pc *pconn) bool {
	for range 64 {
		line, err := pc.br.ReadSlice('\n')
		if err != nil {
			return false
		}
		if len(trimEOL(line)) == 0 {
			return true
		}
	}
	return false
}

var streamBufs = newBufPool(32 << 10)

// drainRefusal reads a lease refusal's small body so its connection can be
// kept.
func (f *Forwarder) drainRefusal(fl *flight, p *pool, pc *pconn, tgt Target, h *head) {
	if h.noBody {
		f.reuse(fl, p, pc, tgt, h.close)
		return
	}
	if h.length < 0 || h.length > 64<<10 {
		pc.close()
		return
	}
	n, err := pc.br.Discard(int(h.length))
	if err != nil || n != int(h.length) {
		pc.close()
		return
	}
	f.reuse(fl, p, pc, tgt, h.close)
}
