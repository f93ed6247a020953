package wire

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestParseMillis(t *testing.T) {
	tests := []struct {
		values []string // nil: absent
		want   int64
		has    bool
		bad    bool
	}{
		{nil, 0, false, false},
		{[]string{"0"}, 0, true, false},
		{[]string{"250"}, 250, true, false},
		{[]string{"0007"}, 7, true, false},
		{[]string{"86400000"}, MaxStalenessMS, true, false},
		{[]string{"86400001"}, 0, false, true},
		{[]string{"-1"}, 0, false, true},
		{[]string{"+1"}, 0, false, true},
		{[]string{"1.5"}, 0, false, true},
		{[]string{"1e3"}, 0, false, true},
		{[]string{"0x10"}, 0, false, true},
		{[]string{"5 6"}, 0, false, true},
		{[]string{"5,6"}, 0, false, true},
		{[]string{""}, 0, false, true},
		{[]string{"1", "2"}, 0, false, true},
		{[]string{"99999999999999999999999999"}, 0, false, true},
		{[]string{"١٢"}, 0, false, true}, // digits, but not ASCII ones
	}
	for _, tc := range tests {
		h := http.Header{}
		if tc.values != nil {
			h[HeaderMaxStaleness] = tc.values
		}
		got, has, err := ParseMillis(h, HeaderMaxStaleness, MaxStalenessMS)
		if got != tc.want || has != tc.has || (err != nil) != tc.bad {
			t.Fatalf("%q: %d %v %v, want %d %v bad=%v", tc.values, got, has, err, tc.want, tc.has, tc.bad)
		}
		if tc.bad && !errors.Is(err, ErrBadMillis) {
			t.Fatalf("%q: %v is not ErrBadMillis", tc.values, err)
		}
	}
}

func TestFormatStaleness(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		ok   bool
		want string
	}{
		{0, true, "0"},
		{-time.Second, true, "0"},
		{time.Nanosecond, true, "1"},
		{time.Millisecond, true, "1"},
		{time.Millisecond + 1, true, "2"},
		{1500 * time.Millisecond, true, "1500"},
		{time.Hour, false, StalenessUnbounded},
	} {
		if got := FormatStaleness(tc.d, tc.ok); got != tc.want {
			t.Fatalf("FormatStaleness(%v, %v) = %q, want %q", tc.d, tc.ok, got, tc.want)
		}
	}
}
