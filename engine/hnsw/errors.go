package hnsw

import "errors"

var (
	// ErrDimension is returned for a vector whose length is not the
	// index's dimension.
	ErrDimension = errors.New("hnsw: wrong vector dimension")
	// ErrNotFinite is returned for a vector holding NaN or an infinity.
	ErrNotFinite = errors.New("hnsw: vector value not finite")
	// ErrConfig is returned by Validate and New for a configuration out of
	// range.
	ErrConfig = errors.New("hnsw: invalid config")
	// ErrK is returned by Search for a non-positive K.
	ErrK = errors.New("hnsw: k must be positive")
	// ErrCorrupt is returned by Load for a graph that is damaged, cut
	// short, or of an unknown version.
	ErrCorrupt = errors.New("hnsw: graph damaged")
	// ErrMissingVector is returned by Load when the vector callback has no
	// vector for a live node.
	ErrMissingVector = errors.New("hnsw: vector missing for a node")
	// ErrReleased is returned by Search and the writers of a graph
	// after Release: the mapped image it read is gone.
	ErrReleased = errors.New("hnsw: graph released")
	// ErrFault is returned by a graph whose mapped image could not be
	// read (its file was shortened under it, by something other than
	// fenec): it answers nothing more; the tenant must be reopened.
	ErrFault = errors.New("hnsw: the mapped tenant file could not be read (shortened under the node?): reopen the tenant")
)
