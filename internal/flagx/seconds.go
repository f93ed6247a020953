// Package flagx holds the command-line flag types fenec's components
// share. It is not a flag library: one type per kind of value the
// configurations take, and nothing else.
package flagx

import (
	"fmt"
	"strconv"
	"time"
)

// Seconds is a duration flag given in (possibly fractional) seconds:
// fs.Var((*flagx.Seconds)(&cfg.Timeout), "timeout", "...").
type Seconds time.Duration

func (s *Seconds) String() string {
	if s == nil {
		return "0"
	}
	return strconv.FormatFloat(time.Duration(*s).Seconds(), 'f', -1, 64)
}

// Set takes a non-negative number of seconds.
func (s *Seconds) Set(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return fmt.Errorf("%q is not a number of seconds", v)
	}
	*s = Seconds(f * float64(time.Second))
	return nil
}
