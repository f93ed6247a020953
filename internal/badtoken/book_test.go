package badtoken

import (
	"testing"
	"time"
)

// Five misses within the window hold a key off for the penalty, its right
// token included; other keys go on; a holder's right token is taken while
// its key is held off; misses spread past the window never add up.
func TestBook(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	b := New[string]()
	for i := range Limit {
		if v, _ := b.Check("stranger", false, true, t0.Add(time.Duration(i)*time.Second)); v != Refused {
			t.Fatalf("miss %d: %v, want Refused", i+1, v)
		}
	}
	at := t0.Add(Limit * time.Second)
	if v, left := b.Check("stranger", true, true, at); v != HeldOff || left <= 0 || left > Penalty {
		t.Fatalf("the right token, held off: %v %v", v, left)
	}
	if v, _ := b.Check("other", true, true, at); v != Pass {
		t.Fatalf("another key: %v", v)
	}
	if v, _ := b.Check("stranger", true, true, at.Add(Penalty)); v != Pass {
		t.Fatalf("after the penalty: %v", v)
	}

	// A holder shares its key with a guesser.
	b.Hold("shared", t0)
	for range Limit {
		b.Check("shared", false, true, t0)
	}
	if got := b.Blocked("shared", t0); got != 0 {
		t.Fatalf("a holder is held off for %v", got)
	}
	if v, _ := b.Check("shared", true, true, t0); v != Pass {
		t.Fatalf("the holder's right token: %v", v)
	}
	if v, _ := b.Check("shared", false, true, t0); v != HeldOff {
		t.Fatalf("a wrong token on the held-off key: %v", v)
	}
	if v, _ := b.Check("shared", true, true, t0.Add(HolderFor+Penalty/2)); v != Pass {
		t.Fatalf("a holder silent past HolderFor after the penalty: %v", v)
	}

	// Misses further apart than the window.
	for i := range 2 * Limit {
		if v, _ := b.Check("slow", false, false, t0.Add(time.Duration(i)*Window/2)); v != Refused {
			t.Fatalf("spread miss %d: %v", i+1, v)
		}
	}
	// A right token that keeps no holder (holds false) leaves none.
	b.Check("data", true, false, t0)
	for range Limit {
		b.Check("data", false, false, t0)
	}
	if v, _ := b.Check("data", true, false, t0); v != HeldOff {
		t.Fatalf("no holder kept: %v", v)
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"::ffff:10.0.0.1", "::ffff:10.0.0.1"},
		{"not an address", "not an address"},
	} {
		if got := ClientKey(tc.addr); got != tc.want {
			t.Errorf("ClientKey(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
