package counted

import "testing"

func TestNames(t *testing.T) {
	for _, c := range []struct {
		names []string
		max   int
		want  string
	}{
		{[]string{"a"}, 10, "1 tenant (a)"},
		{[]string{"a", "b", "c"}, 10, "3 tenants (a, b, c)"},
		{[]string{"a", "b", "c"}, 3, "3 tenants (a, b, c)"},
		{[]string{"a", "b", "c", "d", "e"}, 2, "5 tenants (a, b and 3 more)"},
		{nil, 10, "0 tenants ()"},
	} {
		if got := Names(c.names, "tenant", c.max); got != c.want {
			t.Errorf("Names(%v, %d) = %q, want %q", c.names, c.max, got, c.want)
		}
	}
}
