package engine

import (
	"errors"
	"io"
)

// graphPiece is the most a piece of a graph handed on holds.
const graphPiece = 256 << 10

// piecePipe carries bytes from one goroutine to another in pieces of at
// most graphPiece, queued so the writer never waits: its queue holds all
// the pieces the bytes it was made for take. Each piece read goes back to
// be filled again, so a reader keeping up holds a few pieces, not all.
type piecePipe struct {
	full  chan []byte // closed by the writer after its last piece
	free  chan []byte
	piece int    // the room of a piece: graphPiece, or all the bytes if fewer
	room  int64  // bytes the writer may queue still
	fill  []byte // the piece Write is filling
	cur   []byte // what is left of the piece being read
	held  []byte // that piece, whole
	n     int64  // bytes read
}

// newPiecePipe makes a pipe for size bytes.
func newPiecePipe(size int64) *piecePipe {
	k := size/graphPiece + 1
	return &piecePipe{full: make(chan []byte, k), free: make(chan []byte, k), piece: int(min(size, graphPiece)), room: size}
}

// errPipeFull refuses bytes past those a piecePipe was made for: queued,
// they could fill its queue and hold the writer.
var errPipeFull = errors.New("more bytes than the pipe was made for")

// Write queues b's bytes, a piece queued as it fills (close queues the
// last); past the bytes the pipe was made for, it queues none.
func (p *piecePipe) Write(b []byte) (int, error) {
	if int64(len(b)) > p.room {
		return 0, errPipeFull
	}
	p.room -= int64(len(b))
	n := len(b)
	for len(b) > 0 {
		if p.fill == nil {
			p.fill = p.get(p.piece)[:0]
		}
		k := copy(p.fill[len(p.fill):p.piece], b)
		p.fill, b = p.fill[:len(p.fill)+k], b[k:]
		if len(p.fill) == p.piece {
			p.put(p.fill)
			p.fill = nil
		}
	}
	return n, nil
}

// get returns a piece of n bytes (at most p.piece) to fill, one read
// already if there is.
func (p *piecePipe) get(n int) []byte {
	select {
	case b := <-p.free:
		return b[:n]
	default:
		return make([]byte, n, p.piece)
	}
}

// put queues b.
func (p *piecePipe) put(b []byte) { p.full <- b }

// close queues what Write was filling and says it was the last.
func (p *piecePipe) close() {
	if len(p.fill) > 0 {
		p.put(p.fill)
		p.fill = nil
	}
	close(p.full)
}

// Read reads what was queued, in order; io.EOF once the writer closed the
// pipe and all was read.
func (p *piecePipe) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.held != nil {
			p.free <- p.held // never more pieces than the queue holds
			p.held = nil
		}
		piece, ok := <-p.full
		if !ok {
			return 0, io.EOF
		}
		p.cur, p.held = piece, piece
	}
	k := copy(b, p.cur)
	p.cur = p.cur[k:]
	p.n += int64(k)
	return k, nil
}
