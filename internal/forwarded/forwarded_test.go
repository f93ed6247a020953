package forwarded

import "testing"

// A proof is fixed for a token, differs between tokens, and does not hold
// the token; no token has no proof.
func TestProof(t *testing.T) {
	a, b := Proof("admin-a"), Proof("admin-b")
	if a == "" || a != Proof("admin-a") || a == b || len(a) != 64 {
		t.Fatalf("proofs %q %q", a, b)
	}
	for _, p := range []string{a, b} {
		for _, tok := range []string{"admin-a", "admin-b"} {
			if p == tok {
				t.Fatalf("a proof is its token")
			}
		}
	}
	if Proof("") != "" {
		t.Fatal("an empty token has a proof")
	}
}
