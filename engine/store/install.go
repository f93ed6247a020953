package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fenec-go/fenec/engine/internal/fmap"
	"golang.org/x/sys/unix"
)

func install(path string, r io.Reader, verify func(tmpPath string) error) (int64, error) {
	abs, err := absPath(path)
	if err != nil {
		return 0, err
	}
	if _, err := os.Lstat(abs); err == nil {
		return 0, fmt.Errorf("install %s: %w", abs, ErrExist)
	}
	unregister, err := register(abs)
	if err != nil {
		return 0, fmt.Errorf("install: %w", err)
	}
	defer unregister()
	tmp := abs + ".install"
	f, err := openSide(tmp)
	if err != nil {
		return 0, fmt.Errorf("install: %w", err) // not ours to remove
	}
	n, err := installSide(abs, f, r, verify)
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("install: %w", err)
	}
	return n, nil
}

// installSide copies, checks and verifies the side file f, then links it
// into place. It closes f.
func installSide(path string, f *os.File, r io.Reader, verify func(string) error) (int64, error) {
	tmp := f.Name()
	n, err := io.Copy(f, r)
	if err == nil {
		err = checkImageFile(f, n)
	}
	if err == nil {
		err = datasync(f)
	}
	f.Close() // verify may open it
	if err != nil {
		return 0, err
	}
	if verify != nil {
		if err := verify(tmp); err != nil {
			return 0, fmt.Errorf("verify: %w", err)
		}
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return 0, fmt.Errorf("%s: %w", path, ErrExist)
		}
		return 0, fmt.Errorf("link: %w", err)
	}
	if err := os.Remove(tmp); err != nil {
		return 0, fmt.Errorf("remove side file: %w", err)
	}
	if err := syncDir(path); err != nil {
		return 0, err
	}
	return n, nil
}

// checkImageFile checks every frame of an image file: no tail may be cut
// and it must hold at least one whole image.
func checkImageFile(f *os.File, size int64) error {
	if size < headerSize {
		return fmt.Errorf("%w: header cut short", ErrBadImage)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map image: %w", err)
	}
	defer unix.Munmap(data)
	s, err := scan(data, 0, true)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadImage, err)
	}
	if len(s.images) == 0 {
		return fmt.Errorf("%w: no image in it", ErrBadImage)
	}
	return nil
}

// installOpen is install and open in one pass: the image is copied into
// the side file as it arrives, then made durable while it is read once —
// every frame's checksum checked and the image given to h — and the side
// file linked into place and kept open as the Log, so nothing is decoded
// twice.
// A damaged image, or one h refuses, is ErrBadImage and leaves nothing.
func installOpen(path string, r io.Reader, opts Options, h Replayer) (*Log, int64, error) {
	opts, abs, err := prepare(path, opts)
	if err != nil {
		return nil, 0, err
	}
	if _, err := os.Lstat(abs); err == nil {
		return nil, 0, fmt.Errorf("install %s: %w", abs, ErrExist)
	}
	unregister, err := register(abs) // the Log's own from here on
	if err != nil {
		return nil, 0, fmt.Errorf("install: %w", err)
	}
	tmp := abs + ".install"
	f, err := openSide(tmp)
	if err != nil {
		unregister()
		return nil, 0, fmt.Errorf("install: %w", err) // not ours to remove
	}
	fail := func(err error) (*Log, int64, error) {
		f.Close()
		os.Remove(tmp)
		unregister()
		return nil, 0, fmt.Errorf("install: %w", err)
	}
	// Once the last byte is written, the disk takes the bytes and the
	// file's frames are scanned (for the Log's index) while the decoder
	// finishes what it has; the file is linked into place only once all
	// three are done.
	var (
		synced = make(chan error, 1)
		scans  = make(chan fileScan, 1)
		began  bool
	)
	n, streamed, err := copyDecoding(f, r, h, func(n int64) {
		began = true
		go func() { synced <- datasync(f) }()
		go func() { scans <- scanImageFile(f, n, opts) }()
	})
	var s *scanned
	if began {
		fs := <-scans
		if err == nil {
			s, err = fs.replay(h, streamed)
		}
		fs.unmap()
		if serr := <-synced; err == nil {
			err = serr
		}
	}
	if err != nil {
		return fail(err)
	}
	if err := os.Link(tmp, abs); err != nil {
		if errors.Is(err, os.ErrExist) {
			err = fmt.Errorf("%s: %w", abs, ErrExist)
		}
		return fail(fmt.Errorf("link: %w", err))
	}
	if err := os.Remove(tmp); err != nil {
		os.Remove(abs)
		return fail(fmt.Errorf("remove side file: %w", err))
	}
	if err := syncDir(abs); err != nil {
		os.Remove(abs)
		return fail(err)
	}
	l := &Log{}
	l.init(abs, opts, unregister, f, s)
	return l, n, nil
}

// installChunk is the size of the buffers an arriving image is read into;
// installAhead bounds the buffers the decoder may lag behind the copy.
const (
	installChunk = 1 << 20
	installAhead = 8
)

// copyDecoding copies r into f and, as the bytes arrive, decodes the
// image they start with into h (streamImage). streamed reports that h has
// the image; a stream that starts otherwise is only copied. A decode that
// fails is the install's failure: the image is damaged. What each read
// brings is written and handed on to the decoder without waiting for it,
// which works through the pieces in turn; copied is called with the
// length once the whole stream is in f, before the decoder is waited for.
func copyDecoding(f *os.File, r io.Reader, h Replayer, copied func(n int64)) (n int64, streamed bool, err error) {
	cr := &chunkReader{full: make(chan piece, installAhead*64), free: make(chan []byte, installAhead+1)}
	decoded := make(chan error, 1)
	go func() {
		err := streamImage(bufio.NewReaderSize(cr, 1<<20), h)
		// Whatever the decode made of it, the copy goes on to the end.
		cr.drain()
		decoded <- err
	}()
	made := 0
	var b []byte
	off := 0
	var started int64 // bytes the disk was asked to take
	for {
		if off == len(b) {
			select {
			case b = <-cr.free:
			default:
				if made <= installAhead {
					made++
					b = make([]byte, installChunk)
				} else {
					b = <-cr.free
				}
			}
			off = 0
		}
		k, rerr := r.Read(b[off:])
		if k > 0 {
			if _, werr := f.Write(b[off : off+k]); werr != nil {
				err = werr
				break
			}
			n += int64(k)
			if n-started >= writebackStep {
				startWriteback(f, started, n-started)
				started = n
			}
			p := piece{b: b[off : off+k]}
			if off+k == len(b) {
				p.whole = b // its last piece: the buffer goes back once read
			}
			cr.full <- p
			off += k
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	cr.copyErr = err // read by the decoder once full is closed
	close(cr.full)
	if err == nil {
		copied(n)
	}
	derr := <-decoded
	switch {
	case err != nil:
		return n, false, err
	case errors.Is(derr, errNotStreamed):
		return n, false, nil
	case derr != nil:
		return n, false, fmt.Errorf("%w: %v", ErrBadImage, derr)
	}
	return n, true, nil
}

// writebackStep is how much an install writes before it asks the disk to
// take it (startWriteback).
const writebackStep = 4 << 20

// startWriteback asks the kernel to start writing n bytes of f at off to
// the disk, without waiting for them: the datasync once the whole image
// is in then waits for the last of it only, not for all of it. Only a
// start: a failure is seen by that datasync.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// piece is what one read brought, a part of a buffer; the buffer's last
// piece carries it whole, to be given back once read.
type piece struct {
	b, whole []byte
}

// chunkReader reads the pieces the copy hands on, in order, giving each
// buffer back once its last piece is read; after the last piece, the
// copy's error or io.EOF.
type chunkReader struct {
	full    chan piece  // pieces copied, in order; closed when the copy ends
	free    chan []byte // buffers read, for the copy to fill again
	cur     piece       // the piece being read
	copyErr error       // set before full is closed
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.cur.b) == 0 {
		c.done()
		next, ok := <-c.full
		if !ok {
			if c.copyErr != nil {
				return 0, c.copyErr
			}
			return 0, io.EOF
		}
		c.cur = next
	}
	k := copy(p, c.cur.b)
	c.cur.b = c.cur.b[k:]
	return k, nil
}

// done gives the current piece's buffer back if it was its last.
func (c *chunkReader) done() {
	if c.cur.whole != nil {
		c.free <- c.cur.whole
	}
	c.cur = piece{}
}

// drain gives back every buffer still to come, until the copy ends.
func (c *chunkReader) drain() {
	c.done()
	for c.cur = range c.full {
		c.done()
	}
}

// fileScan is an installed image file mapped and its frames scanned
// (every checksum checked but those of the image it starts with, which
// its decode as it came checked; no tail cut, at least one image): what
// replaying it needs.
type fileScan struct {
	reg  *fmap.Region // the mapping, data its bytes
	data []byte
	s    *scanned
	err  error
	opts Options
}

// scanImageFile maps the image file f of size bytes and scans it, the
// checksums of the image it starts with left to the decode as it came.
func scanImageFile(f *os.File, size int64, opts Options) fileScan {
	if size < headerSize {
		return fileScan{err: fmt.Errorf("%w: header cut short", ErrBadImage)}
	}
	// Not populated: the scan reads the leading image's frame heads
	// only, not their bodies.
	reg, err := fmap.Map(f, size)
	if err != nil {
		return fileScan{err: fmt.Errorf("map image: %w", err)}
	}
	return checkScan(reg, opts, true)
}

// checkScan scans the mapped image file data (trusting its leading image
// with lead).
func checkScan(reg *fmap.Region, opts Options, lead bool) fileScan {
	data := reg.Bytes()
	s, err := scanTrusting(data, opts.indexEvery, true, lead)
	if err != nil {
		return fileScan{reg: reg, data: data, err: fmt.Errorf("%w: %v", ErrBadImage, err)}
	}
	if len(s.images) == 0 {
		return fileScan{reg: reg, data: data, err: fmt.Errorf("%w: no image in it", ErrBadImage)}
	}
	return fileScan{reg: reg, data: data, s: s, opts: opts}
}

// replay gives h what it does not have yet: only the records after the
// image if streamed says h has that image already, which must then be the
// file's only one; else the whole file.
func (fs fileScan) replay(h Replayer, streamed bool) (*scanned, error) {
	if fs.err != nil {
		return nil, fs.err
	}
	s := fs.s
	if !streamed {
		// Nothing was decoded as it came, so nothing was checked:
		// the leading image's checksums are checked now.
		again := checkScan(fs.reg, fs.opts, false)
		if again.err != nil {
			return nil, again.err
		}
		s = again.s
	}
	if streamed {
		if len(s.images) != 1 || s.images[0].start != headerSize {
			return nil, fmt.Errorf("%w: the image decoded as it came is not the file's only one", ErrBadImage)
		}
		if err := replayRecords(fs.data[:s.end], s.images[0].end, h); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadImage, err)
		}
		return s, nil
	}
	if err := replay(fs.data[:s.end], fs.reg, s, h); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadImage, err)
	}
	return s, nil
}

// unmap lets go of the scan's reference on the mapping (what h kept of
// it stays mapped until it lets go too).
func (fs fileScan) unmap() {
	if fs.reg != nil {
		fs.reg.Release()
	}
}
