package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// table collects rows and prints them aligned.
type table struct {
	notes []string
	rows  [][4]string
}

func (t *table) note(f string, args ...any) { t.notes = append(t.notes, fmt.Sprintf(f, args...)) }
func (t *table) row(a, b, c, d string) {
	t.rows = append(t.rows, [4]string{a, b, c, d})
	fmt.Fprintf(os.Stderr, "... %s: %s: %s %s\n", a, b, c, d)
}

func (t *table) String() string {
	var w [4]int
	head := [4]string{"set", "measure", "value", "note"}
	for i, h := range head {
		w[i] = len([]rune(h))
	}
	for _, r := range t.rows {
		for i, s := range r {
			w[i] = max(w[i], len([]rune(s)))
		}
	}
	var sb strings.Builder
	for _, n := range t.notes {
		sb.WriteString(n + "\n")
	}
	line := func(r [4]string) {
		for i, s := range r {
			fmt.Fprintf(&sb, "%s%s  ", s, strings.Repeat(" ", w[i]-len([]rune(s))))
		}
		sb.WriteString("\n")
	}
	line(head)
	line([4]string{strings.Repeat("-", w[0]), strings.Repeat("-", w[1]), strings.Repeat("-", w[2]), strings.Repeat("-", w[3])})
	for _, r := range t.rows {
		line(r)
	}
	return sb.String()
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func fmtMB(b uint64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
