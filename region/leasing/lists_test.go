package leasing

import "testing"

func TestGainedAndLists(t *testing.T) {
	for _, c := range []struct {
		old, list []string
		want      bool
	}{
		{nil, nil, false},
		{nil, []string{"a"}, true},
		{[]string{"a", "b"}, []string{"a"}, false},
		{[]string{"a"}, []string{"a", "c"}, true},
	} {
		if got := gained(c.old, c.list); got != c.want {
			t.Errorf("gained(%v, %v) = %v, want %v", c.old, c.list, got, c.want)
		}
	}
}
