// Package counted says a list of names in a refusal: how many, and the
// first few of them.
package counted

import (
	"fmt"
	"strings"
)

// Names is "1 tenant (a)", "3 tenants (a, b, c)", naming at most max of
// names and counting the rest ("12 tenants (a, ..., j and 2 more)").
func Names(names []string, noun string, max int) string {
	n := len(names)
	if n != 1 {
		noun += "s"
	}
	shown := names[:min(n, max)]
	list := strings.Join(shown, ", ")
	if n > len(shown) {
		list += fmt.Sprintf(" and %d more", n-len(shown))
	}
	return fmt.Sprintf("%d %s (%s)", n, noun, list)
}
