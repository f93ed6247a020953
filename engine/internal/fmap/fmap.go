package fmap

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A Region is a read-only view of a file's first bytes, unmapped when the
// last reference is released. The zero Region is not usable: make one with
// Map, or with Hold for bytes that are not mapped (tests, and a graph read
// from a stream into memory).
type Region struct {
	data  []byte
	refs  atomic.Int64
	unmap func([]byte) error
}

// Map maps the first size bytes of f read-only. The Region starts with
// one reference, the caller's.
//
// The mapping is made through a description of the file of its own where
// the system gives one (/proc/self/fd), not through f's: a mapping keeps
// the description it was made through, and with it an flock taken on it,
// so a mapping that outlives f (a read still encoding what it found as
// its tenant closes) would keep the tenant locked.
func Map(f *os.File, size int64) (*Region, error) {
	if size <= 0 {
		return Hold(nil, nil), nil
	}
	fd := int(f.Fd())
	own, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		defer unix.Close(own)
		fd = own
	}
	data, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map file: %w", err)
	}
	return Hold(data, unix.Munmap), nil
}

// Hold makes a Region of data with one reference; unmap, if not nil, is
// called with data once the last is released.
func Hold(data []byte, unmap func([]byte) error) *Region {
	r := &Region{data: data, unmap: unmap}
	r.refs.Store(1)
	return r
}

// Bytes returns the mapped bytes; they may be read only while the caller
// holds a reference.
func (r *Region) Bytes() []byte { return r.data }

// Acquire takes another reference, unless the last was released already
// (the bytes are gone): then it returns false.
func (r *Region) Acquire() bool {
	for {
		n := r.refs.Load()
		if n <= 0 {
			return false
		}
		if r.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release gives a reference back; the last one unmaps.
func (r *Region) Release() {
	switch n := r.refs.Add(-1); {
	case n == 0:
		if r.unmap != nil {
			_ = r.unmap(r.data) // fails only for a range that is not mapped
		}
		r.data = nil
	case n < 0:
		panic("fmap: region released more often than acquired")
	}
}

// Drop lets the process's resident set go of the mapped pages it touched
// (madvise MADV_DONTNEED): the file's pages stay in the page cache, and
// come back into the process as they are read again. An open calls it
// once the whole file was read for its checksums, so the process keeps
// resident only what its searches read since. The caller holds a
// reference.
func (r *Region) Drop() {
	if r.unmap != nil && len(r.data) > 0 {
		_ = unix.Madvise(r.data, unix.MADV_DONTNEED) // advice: nothing to undo if refused
	}
}

// Live reports whether the region is still mapped (tests read it).
func (r *Region) Live() bool { return r.refs.Load() > 0 }
