package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// CounterValue reads a counter's value.
func CounterValue(tb testing.TB, c prometheus.Counter) float64 {
	tb.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
