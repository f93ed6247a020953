package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the module's path; packages are named below it.
const module = "github.com/fenec-go/fenec"

// importRules is the package graph the README's "What is where" table
// draws: which of fenec's packages each may import (a name stands for the
// package and every one below it). The rule of the longest name that
// covers a package is its rule; a package no rule covers fails the test,
// so a new package is given its place on purpose.
var importRules = map[string][]string{
	"wire":                      nil,                  // the standard library only
	"lease":                     {"internal/jsonerr"}, // one strict decoding of every JSON body
	"internal/jsonerr":          nil,                  // the standard library only
	"engine":                    {"engine"},
	"engine/fql":                nil,
	"internal":                  {"wire"},
	"internal/audit":            nil, // the standard library only
	"internal/history":          nil, // the standard library and porcupine
	"internal/connlimit":        {"internal/badtoken"},
	"internal/profiling":        {"internal/netx"}, // the one loopback rule
	"internal/startup":          {"internal/version"},
	"internal/h1":               {"internal/httptoken"},
	"internal/rawtcp":           nil,
	"internal/tlsx":             {"internal/rawtcp"},
	"internal/testkit":          {"internal/tlsx"},
	"internal/testkit/testnode": {"internal/testkit", "node", "wire"},
	"global":                    {"wire", "lease", "internal/tlsx"}, // lease: the bounds on the epochs it records
	"node":                      {"engine", "lease", "wire", "internal"},
	"region":                    {"global", "lease", "wire", "internal", "region/forward", "region/leasing", "region/merge", "region/nodeapi", "region/copies", "region/repair", "region/link", "region/lead", "region/trust", "region/failover"},
	"region/forward":            {"wire", "internal"},
	"region/leasing":            {"global", "lease", "wire", "internal", "region/nodeapi", "region/lead"}, // nodeapi, lead: the sentinels of a node's failed call, of not leading
	"region/lead":               {"global"},
	"region/nodeapi":            {"global", "wire", "internal"},
	"region/copies":             {"global", "wire", "internal", "region/nodeapi"},
	"region/repair":             {"global", "wire", "internal", "region/nodeapi"},
	"region/link":               {"global", "lease", "internal"},
	"region/failover":           {"global", "wire", "region/nodeapi", "region/leasing", "region/forward"}, // leasing: the result's type; forward: the 503's
	"region/merge":              {"engine/fql"},
	"region/trust":              {"global", "internal"},
	"cmd":                       {"engine", "node", "global", "lease", "region", "wire", "internal"},
	"tests":                     {"tests", "wire", "internal/testkit", "internal/tlsx", "internal/nemesis", "internal/history"},
	"bench":                     {"bench/internal/benchkit", "engine", "node", "global", "lease", "region", "wire", "internal/tlsx", "internal/history", "tests/proxy", "tests/dnsstub"},
	"docs":                      nil, // reads the code as text
}

// covers says whether name stands for pkg: pkg is name or below it.
func covers(name, pkg string) bool {
	return pkg == name || strings.HasPrefix(pkg, name+"/")
}

// ruleOf is the rule covering pkg: the longest name that covers it.
func ruleOf(pkg string) (name string, may []string, ok bool) {
	for n, m := range importRules {
		if covers(n, pkg) && len(n) > len(name) {
			name, may, ok = n, m, true
		}
	}
	return name, may, ok
}

// listed is a package as go list -json tells it.
type listed struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

// goList runs go list -json with args in the module and decodes what it
// tells, package by package.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v: %s", args, err, stderr.Bytes())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// own is the path of one of fenec's packages below the module ("" for
// anything else).
func own(path string) string {
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return ""
}

// TestImportRules: every package imports only what its rule lets it
// (what its tests import beside it is not counted, but none imports a
// command or a benchmark), and wire needs nothing but the standard
// library.
func TestImportRules(t *testing.T) {
	pkgs := goList(t, module+"/...")
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: not the module's", len(pkgs))
	}
	checked := 0
	for _, p := range pkgs {
		pkg := own(p.ImportPath)
		name, may, ok := ruleOf(pkg)
		if !ok {
			t.Errorf("%s: no rule says what it may import; give it one in importRules and the README", pkg)
			continue
		}
		for _, imp := range p.Imports {
			dep := own(imp)
			if dep == "" {
				continue
			}
			checked++
			if !slices.ContainsFunc(may, func(n string) bool { return covers(n, dep) }) {
				t.Errorf("%s imports %s: its rule (%s) allows %v", pkg, dep, name, may)
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if dep := own(imp); (covers("cmd", dep) || covers("bench", dep)) && !covers("bench", pkg) {
				t.Errorf("%s's tests import %s", pkg, dep)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no import of fenec's own was checked")
	}
	for _, p := range goList(t, "-deps", module+"/wire") {
		if !p.Standard && p.ImportPath != module+"/wire" {
			t.Errorf("wire depends on %s: it is the standard library's only", p.ImportPath)
		}
	}
}

// TestImportRulesRefuse: the rules refuse what the graph forbids, so the
// test above can fail.
func TestImportRulesRefuse(t *testing.T) {
	for _, tc := range []struct {
		pkg, dep string
		allowed  bool
	}{
		{"region/forward", "global", false},
		{"region/forward", "region", false},
		{"region/leasing", "region", false},
		{"region/leasing", "region/forward", false},
		{"region/leasing", "node", false},
		{"region", "region/leasing", true},
		{"region/link", "region", false},
		{"region/link", "region/forward", false},
		{"region/link", "region/leasing", false},
		{"region/link", "node", false},
		{"region", "region/link", true},
		{"region/lead", "region", false},
		{"region/lead", "region/forward", false},
		{"region/lead", "region/leasing", false},
		{"region/lead", "node", false},
		{"region", "region/lead", true},
		{"region/trust", "region", false},
		{"region/trust", "region/forward", false},
		{"region/trust", "region/nodeapi", false},
		{"region/trust", "node", false},
		{"region", "region/trust", true},
		{"region/failover", "region", false},
		{"region/failover", "node", false},
		{"region/failover", "region/link", false},
		{"region/leasing", "region/failover", false},
		{"region", "region/failover", true},
		{"region/leasing", "region/lead", true},
		{"region/repair", "region", false},
		{"region/repair", "region/copies", false},
		{"region/repair", "region/leasing", false},
		{"region/repair", "node", false},
		{"region", "region/repair", true},
		{"region/merge", "engine", false},
		{"region", "node", false},
		{"node", "global", false},
		{"node", "region", false},
		{"engine/store", "wire", false},
		{"wire", "engine", false},
		{"global", "node", false},
		{"internal/netx", "node", false},
		{"region", "region/forward", true},
		{"node", "internal/bodygap", true},
		{"internal/testkit/testnode", "node", true},
		{"engine", "engine/fql", true},
	} {
		_, may, ok := ruleOf(tc.pkg)
		got := ok && slices.ContainsFunc(may, func(n string) bool { return covers(n, tc.dep) })
		if got != tc.allowed {
			t.Errorf("%s importing %s: allowed %v, want %v", tc.pkg, tc.dep, got, tc.allowed)
		}
	}
}
