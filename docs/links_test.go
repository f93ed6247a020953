package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLinksStayInRepo: every relative link of the README, the docs and the
// deploy kit's README names a file of this repository, and the README links
// every page of docs/.
func TestLinksStayInRepo(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("*.md")
	if err != nil || len(pages) < 6 {
		t.Fatalf("docs pages %v: %v", pages, err)
	}
	files := append([]string{"../README.md", "../deploy/README.md"}, pages...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	readme := ""
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "../README.md" {
			readme = string(b)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, frag, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if target == "" {
				target = filepath.Base(f)
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchors(t, filepath.Join(filepath.Dir(f), target))[frag] {
				t.Errorf("%s links %s: no such heading", f, m[1])
			}
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(f), target))
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", f, m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links %s, which does not exist", f, m[1])
			}
		}
	}
	for _, p := range pages {
		if p != "README.md" && !strings.Contains(readme, "(docs/"+p+")") {
			t.Errorf("the README does not link docs/%s", p)
		}
	}
}

// TestAlertsLinkTheRunbook: every alert's runbook annotation names a
// section of runbook.md, and every alert has one.
func TestAlertsLinkTheRunbook(t *testing.T) {
	b, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(b), -1)
	links := regexp.MustCompile(`runbook: docs/runbook\.md#(\S+)`).FindAllStringSubmatch(string(b), -1)
	if len(alerts) < 10 || len(links) != len(alerts) {
		t.Fatalf("%d alerts, %d runbook links", len(alerts), len(links))
	}
	have := anchors(t, "runbook.md")
	for i, a := range alerts {
		if want := strings.ToLower(a[1]); links[i][1] != want || !have[want] {
			t.Errorf("alert %s links #%s; runbook.md has the section: %v", a[1], links[i][1], have[want])
		}
	}
}

// anchors are the ids a Markdown renderer gives the headings of a file:
// lower case, spaces as dashes, punctuation other than - and _ dropped.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		h := strings.TrimLeft(l, "#")
		if h == l || !strings.HasPrefix(h, " ") {
			continue
		}
		var id strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				id.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				id.WriteRune(r)
			}
		}
		out[id.String()] = true
	}
	return out
}
