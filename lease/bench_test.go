package lease

import (
	"testing"
	"time"
)

// BenchmarkWritable is the check every write makes twice.
func BenchmarkWritable(b *testing.B) {
	tenants := make([]string, 1000)
	for i := range tenants {
		tenants[i] = "tenant-" + string(rune('a'+i%26)) + time.Duration(i).String()
	}
	l := NewNodeLease(Binding{}, nil)
	if _, err := l.Handle(0, grantOf("r", 1, 1, 0, 1_000_000, tenants, nil)); err != nil {
		b.Fatal(err)
	}
	if _, err := l.Handle(0, grantOf("r", 1, 2, 1, 1_000_000, nil, tenants)); err != nil {
		b.Fatal(err)
	}
	clock := BootClock{}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := l.Writable(clock.Now()%time.Second, tenants[500]); !ok {
			b.Fatal("not writable")
		}
	}
}

// BenchmarkHandle is one renewal on a node holding a lease.
func BenchmarkHandle(b *testing.B) {
	l := NewNodeLease(Binding{}, nil)
	list := []string{"a", "b", "c"}
	if _, err := l.Handle(0, grantOf("r", 1, 1, 0, 1000, list, nil)); err != nil {
		b.Fatal(err)
	}
	g := grantOf("r", 1, 1, 0, 1000, nil, list)
	n := uint64(2)
	b.ReportAllocs()
	for b.Loop() {
		g.N, g.Ack = n, n-1
		if _, err := l.Handle(time.Duration(n), g); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkBootClock is one reading of the node's clock.
func BenchmarkBootClock(b *testing.B) {
	var c BootClock
	for b.Loop() {
		_ = c.Now()
	}
}

// BenchmarkWritableNoClock is the check alone, the clock read once.
func BenchmarkWritableNoClock(b *testing.B) {
	l := NewNodeLease(Binding{}, nil)
	list := []string{"a", "b", "c"}
	if _, err := l.Handle(0, grantOf("r", 1, 1, 0, 1000, list, nil)); err != nil {
		b.Fatal(err)
	}
	if _, err := l.Handle(0, grantOf("r", 1, 2, 1, 1000, nil, list)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ok, _ := l.Writable(time.Millisecond, "b"); !ok {
			b.Fatal("not writable")
		}
	}
}
