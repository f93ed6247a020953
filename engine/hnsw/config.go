package hnsw

import "fmt"

// Metric says how vectors are compared.
type Metric uint8

const (
	// Cosine scores the cosine similarity; vectors are normalised on Add
	// (a zero vector stays zero and scores 0 against everything).
	Cosine Metric = iota
	// L2 scores the negative Euclidean distance.
	L2
	// Dot scores the dot product of the vectors as given.
	Dot
)

// String names the metric as the query language does.
func (m Metric) String() string {
	switch m {
	case Cosine:
		return "cosine"
	case L2:
		return "l2"
	case Dot:
		return "dot"
	}
	return fmt.Sprintf("metric(%d)", uint8(m))
}

// Limits on configuration values.
const (
	MaxDim = 1 << 16
	MaxM   = 1 << 10
	MaxEf  = 1 << 16
)

// Config configures one index. Zero M, EfConstruction and EfSearch select
// the defaults.
type Config struct {
	// Dim is the length of every vector; required.
	Dim int
	// Metric compares vectors; the zero value is Cosine.
	Metric Metric
	// M is the number of links a node keeps per level above 0 (2·M at
	// level 0). Default 32 (see the package doc for why).
	M int
	// EfConstruction is the candidate list length while inserting.
	// Default 100.
	EfConstruction int
	// EfSearch is the candidate list length while searching when a Query
	// names none. Default 256.
	EfSearch int
	// Seed seeds the level draw, so the same inserts give the same graph.
	Seed int64
}

// Defaults, chosen so that a search for 10 at default settings finds at
// least 95% of the exact answer on 20 000 random 128-d vectors (the
// package doc says what they cost).
const (
	DefaultM              = 32
	DefaultEfConstruction = 100
	DefaultEfSearch       = 256
)

// DefaultConfig returns the defaults for vectors of length dim.
func DefaultConfig(dim int) Config {
	return Config{Dim: dim, Metric: Cosine, M: DefaultM, EfConstruction: DefaultEfConstruction, EfSearch: DefaultEfSearch}
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig(c.Dim)
	if c.M == 0 {
		c.M = d.M
	}
	if c.EfConstruction == 0 {
		c.EfConstruction = d.EfConstruction
	}
	if c.EfSearch == 0 {
		c.EfSearch = d.EfSearch
	}
	return c
}

// Validate checks the configuration after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Dim < 1 || c.Dim > MaxDim:
		return fmt.Errorf("%w: dim %d not in 1..%d", ErrConfig, c.Dim, MaxDim)
	case c.Metric > Dot:
		return fmt.Errorf("%w: unknown metric %d", ErrConfig, c.Metric)
	case c.M < 2 || c.M > MaxM:
		return fmt.Errorf("%w: m %d not in 2..%d", ErrConfig, c.M, MaxM)
	case c.EfConstruction < 1 || c.EfConstruction > MaxEf:
		return fmt.Errorf("%w: ef_construction %d not in 1..%d", ErrConfig, c.EfConstruction, MaxEf)
	case c.EfSearch < 1 || c.EfSearch > MaxEf:
		return fmt.Errorf("%w: ef_search %d not in 1..%d", ErrConfig, c.EfSearch, MaxEf)
	}
	return nil
}
