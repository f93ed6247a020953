package engine

import (
	"testing"

	"github.com/fenec-go/fenec/engine/fql"
	"github.com/fenec-go/fenec/engine/hnsw"
)

// An @hnsw field declared without parameters gets the graph's own
// defaults, the settings its recall is measured and tested at.
func TestHNSWDefaultsAreTheGraphs(t *testing.T) {
	got := [3]int{fql.DefaultM, fql.DefaultEfConstruction, fql.DefaultEfSearch}
	want := [3]int{hnsw.DefaultM, hnsw.DefaultEfConstruction, hnsw.DefaultEfSearch}
	if got != want {
		t.Fatalf("the language's @hnsw defaults (m, ef_construction, ef_search) are %v, the graph's %v", got, want)
	}
}
