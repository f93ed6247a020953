package testkit

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyWaitsForEitherKind(t *testing.T) {
	var n atomic.Int32
	Eventually(t, time.Minute, func() bool { return n.Add(1) >= 3 })
	n.Store(0)
	Eventually(t, time.Minute, func() error {
		if n.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
}

// fakeTB records a failure instead of failing the test, and stops the
// caller's goroutine as testing.T.Fatalf does.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = format
	for _, a := range args {
		if e, ok := a.(error); ok {
			f.msg += " " + e.Error()
		}
	}
	panic(f)
}

func failure(cond func(tb testing.TB)) (msg string) {
	f := &fakeTB{}
	defer func() {
		if p := recover(); p != f {
			panic(p)
		}
		msg = f.msg
	}()
	cond(f)
	return ""
}

func TestEventuallyFailsSayingWhy(t *testing.T) {
	if msg := failure(func(tb testing.TB) {
		Eventually(tb, 10*time.Millisecond, func() error { return errors.New("still 3 rows") })
	}); !strings.Contains(msg, "still 3 rows") {
		t.Fatalf("error condition failed with %q", msg)
	}
	if msg := failure(func(tb testing.TB) {
		Eventually(tb, 10*time.Millisecond, func() bool { return false }, "the copy at seq ", 7)
	}); !strings.Contains(msg, "the copy at seq 7") {
		t.Fatalf("bool condition failed with %q", msg)
	}
	if msg := failure(func(tb testing.TB) {
		Eventually(tb, 10*time.Millisecond, func() bool { return false })
	}); !strings.Contains(msg, "condition not met") {
		t.Fatalf("bare bool condition failed with %q", msg)
	}
}
