package region

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenec-go/fenec/internal/audit"
)

// A stranger's flood of refused /_shard/ requests, each with a 60 KB
// path, tokenless and then held off, leaves the router's audit log a few
// lines long — the first refusal of each kind and, at the window's end,
// its count — while every change made beside the flood is written whole,
// one line each. Written a line a request, as before, the flood alone
// was 60 MB.
func TestAuditFloodBoundedCP(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	r := startCPRouter(t, func(c *Config) { c.Audit = auditPath; c.Region = "eu" })
	n1 := startCPNode(t)
	r.addNode(t, "n1", n1) // the right token first: this address is never held off it
	long := "/_shard/tenants/" + strings.Repeat("a", 60<<10)
	const flood, every = 1000, 100
	var changes []string
	for i := range flood {
		tok := ""
		if i%2 == 1 {
			tok = "wrong"
		}
		st, _, _ := cpDo(t, http.MethodGet, r.url+long, tok, nil, nil)
		if st != http.StatusUnauthorized && st != http.StatusTooManyRequests {
			t.Fatalf("refusal %d: %d", i, st)
		}
		if i%every == 0 {
			name := fmt.Sprintf("t%d", i)
			r.place(t, name, "n1")
			changes = append(changes, name)
		}
	}
	st, err := os.Stat(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if bound := int64(len(changes)+8) * audit.MaxLine; st.Size() > bound {
		t.Fatalf("%d refusals of 60 KB paths beside %d changes wrote %d bytes to the audit log; bound %d",
			flood, len(changes), st.Size(), bound)
	}
	if err := r.rt.Close(); err != nil { // the window's counts are written as it closes
		t.Fatal(err)
	}
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	placed := map[string]bool{}
	whole, counted := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		switch {
		case e.What == "place" && e.Status == http.StatusCreated:
			placed[e.Tenant] = true
		case e.What == "auth" && e.Repeated > 0:
			counted += e.Repeated
		case e.What == "auth":
			whole++
			if len(e.Path) > audit.MaxField+32 {
				t.Fatalf("a refusal's path written %d bytes long", len(e.Path))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if whole+counted != flood || whole > 3 {
		t.Fatalf("refusals: %d written whole and %d counted, of %d", whole, counted, flood)
	}
	for _, name := range changes {
		if !placed[name] {
			t.Fatalf("the placement of %s, made during the flood, is not in the audit log", name)
		}
	}
}
