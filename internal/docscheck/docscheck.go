// Package docscheck is what the commands' tests use to keep their flags and
// the reference in docs/ from drifting: a section of a Markdown file, and
// whether it names a flag.
package docscheck

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// Section returns the part of the Markdown file at path under the heading
// whose text is title (any level), up to the next heading of the same or a
// higher level.
func Section(path, title string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level == 0 || strings.TrimSpace(l[level:]) != title {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			lv := len(lines[j]) - len(strings.TrimLeft(lines[j], "#"))
			if lv > 0 && lv <= level && strings.HasPrefix(lines[j][lv:], " ") {
				end = j
				break
			}
		}
		return strings.Join(lines[i+1:end], "\n"), nil
	}
	return "", fmt.Errorf("%s: no heading %q", path, title)
}

// Names reports whether text names flag f as `--name` (or `-n` for a
// one-letter flag).
func Names(text string, f *flag.Flag) bool {
	if len(f.Name) == 1 {
		return strings.Contains(text, "`-"+f.Name)
	}
	return strings.Contains(text, "`--"+f.Name)
}

// Missing lists the flags of fs that text does not name.
func Missing(text string, fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if !Names(text, f) {
			out = append(out, f.Name)
		}
	})
	return out
}
