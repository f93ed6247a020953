package hugemem

import (
	"testing"
	"unsafe"
)

// advised turns the advice on for the test.
func advised(t *testing.T) {
	t.Helper()
	Advise(true)
	t.Cleanup(func() { Advise(false) })
}

// Make gives an array as make does, cleared and of the length and room
// asked, a large one starting on a huge page once advised.
func TestMakeIsMake(t *testing.T) {
	t.Run("unadvised", func(t *testing.T) { makeIsMake(t, false) })
	t.Run("advised", func(t *testing.T) {
		advised(t)
		makeIsMake(t, true)
	})
}

func makeIsMake(t *testing.T, aligned bool) {
	for _, c := range [][2]int{{0, 0}, {3, 10}, {Min / 4, Min / 4}, {0, 3 * Min}, {5 * Min / 4, 5 * Min / 4}} {
		s := Make[float32](c[0], c[1])
		if len(s) != c[0] || cap(s) != c[1] {
			t.Fatalf("Make(%d, %d): len %d cap %d", c[0], c[1], len(s), cap(s))
		}
		if at := uintptr(unsafe.Pointer(unsafe.SliceData(s))); aligned && cap(s)*4 >= Min && at%hugePage != 0 {
			t.Fatalf("Make(%d, %d) starts at %#x, not on a huge page", c[0], c[1], at)
		}
		s = s[:cap(s)]
		for i, v := range s {
			if v != 0 {
				t.Fatalf("Make(%d, %d): element %d is %v", c[0], c[1], i, v)
			}
		}
		for i := range s {
			s[i] = float32(i)
		}
		for i, v := range s {
			if v != float32(i) {
				t.Fatalf("Make(%d, %d): element %d reads %v after writing %d", c[0], c[1], i, v, i)
			}
		}
	}
}

// The run of whole huge pages in a range.
func TestAligned(t *testing.T) {
	const h = hugePage
	for _, c := range []struct {
		at, size, off, n uintptr
	}{
		{at: 0, size: h, off: 0, n: h},
		{at: 0, size: h - 1, off: 0, n: 0},
		{at: 1, size: 2 * h, off: h - 1, n: h},
		{at: h + 10, size: h, off: 0, n: 0},
		{at: h - 4096, size: 3*h + 8192, off: 4096, n: 3 * h},
	} {
		if off, n := aligned(c.at, c.size); off != c.off || n != c.n {
			t.Errorf("aligned(%#x, %#x) = %#x, %#x; want %#x, %#x", c.at, c.size, off, n, c.off, c.n)
		}
	}
}

// An array of elements whose size does not divide the heap's page is made
// and advised where it lies.
func TestMakeOddElements(t *testing.T) {
	advised(t)
	type odd [3]int64
	s := Make[odd](7, Min/24+1)
	if len(s) != 7 || cap(s) != Min/24+1 {
		t.Fatalf("len %d cap %d", len(s), cap(s))
	}
	s = s[:cap(s)]
	for i := range s {
		if s[i] != (odd{}) {
			t.Fatalf("element %d is %v", i, s[i])
		}
		s[i] = odd{int64(i), 1, 2}
	}
	if s[len(s)-1][0] != int64(len(s)-1) {
		t.Fatal("last element lost")
	}
}
