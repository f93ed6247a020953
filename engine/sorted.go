package engine

import (
	"math"
	"sync/atomic"

	"github.com/google/btree"
)

// sortedIndex orders (key, id) pairs of one field: @sorted, and @ttl's
// expiry order. Int and timestamp fields keep their keys unboxed in a tree
// of their own (less memory, cheaper comparisons); float and text fields
// keep them as values.
type sortedIndex struct {
	ints *btree.BTreeG[intItem]    // int and timestamp fields
	vals *btree.BTreeG[sortedItem] // float and text fields
	// ready: built (collection.sortedOf, on first use); until then writes
	// leave it be.
	ready atomic.Bool
}

type intItem struct{ k, id int64 }

type sortedItem struct {
	key any
	id  int64
}

func intLess(a, b intItem) bool {
	if a.k != b.k {
		return a.k < b.k
	}
	return a.id < b.id
}

func sortedLess(a, b sortedItem) bool {
	if c := cmpKeys(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func newSortedIndex(k typeKind) *sortedIndex {
	if k == tInt || k == tTimestamp {
		return &sortedIndex{ints: btree.NewG(32, intLess)}
	}
	return &sortedIndex{vals: btree.NewG(32, sortedLess)}
}

// add indexes key k of id. An int index takes only int keys: the schema
// gives it no others.
func (s *sortedIndex) add(k any, id int64) {
	if s.ints != nil {
		if x, ok := k.(int64); ok {
			s.ints.ReplaceOrInsert(intItem{x, id})
		}
		return
	}
	s.vals.ReplaceOrInsert(sortedItem{k, id})
}

func (s *sortedIndex) remove(k any, id int64) {
	if s.ints != nil {
		if x, ok := k.(int64); ok {
			s.ints.Delete(intItem{x, id})
		}
		return
	}
	s.vals.Delete(sortedItem{k, id})
}

func (s *sortedIndex) len() int {
	if s.ints != nil {
		return s.ints.Len()
	}
	return s.vals.Len()
}

// itemBytes estimates one entry's memory, tree slack included.
func (s *sortedIndex) itemBytes() int64 {
	if s.ints != nil {
		return 24
	}
	return 48
}

// bound is one end of a key range.
type bound struct {
	key       any
	inclusive bool
	set       bool
}

// sortKey is an entry's key as scan passes it: unboxed for an int index.
type sortKey struct {
	i     int64
	v     any
	isInt bool
}

// value is the key as a runtime value.
func (k sortKey) value() any {
	if k.isInt {
		return k.i
	}
	return k.v
}

func (k sortKey) same(o sortKey) bool {
	if k.isInt {
		return k.i == o.i
	}
	return cmpKeys(k.v, o.v) == 0
}

// scan calls fn for ids whose key lies within lo..hi, ascending (or
// descending), until fn returns false. Keys compare with bounds as
// cmpKeys orders them.
func (s *sortedIndex) scan(lo, hi bound, desc bool, fn func(k sortKey, id int64) bool) {
	if s.ints != nil {
		s.scanInts(lo, hi, desc, fn)
		return
	}
	in := func(it sortedItem) (below, above bool) {
		if lo.set {
			c := cmpKeys(it.key, lo.key)
			if c < 0 || (c == 0 && !lo.inclusive) {
				return true, false
			}
		}
		if hi.set {
			c := cmpKeys(it.key, hi.key)
			if c > 0 || (c == 0 && !hi.inclusive) {
				return false, true
			}
		}
		return false, false
	}
	visit := func(it sortedItem) bool {
		below, above := in(it)
		if desc {
			below, above = above, below
		}
		switch {
		case above:
			return false
		case below:
			return true
		}
		return fn(sortKey{v: it.key}, it.id)
	}
	switch {
	case !desc && lo.set:
		s.vals.AscendGreaterOrEqual(sortedItem{key: lo.key, id: math.MinInt64}, visit)
	case !desc:
		s.vals.Ascend(visit)
	case hi.set:
		s.vals.DescendLessOrEqual(sortedItem{key: hi.key, id: math.MaxInt64}, visit)
	default:
		s.vals.Descend(visit)
	}
}

// scanInts is scan over an int index: the bounds become an int range.
func (s *sortedIndex) scanInts(lo, hi bound, desc bool, fn func(k sortKey, id int64) bool) {
	from, ok1 := intFloor(lo)
	to, ok2 := intCeil(hi)
	if !ok1 || !ok2 || from > to {
		return
	}
	visit := func(it intItem) bool { return fn(sortKey{i: it.k, isInt: true}, it.id) }
	if desc {
		s.ints.DescendRange(intItem{to, math.MaxInt64}, intItem{from, math.MinInt64}, func(it intItem) bool {
			if it.k < from {
				return false
			}
			return visit(it)
		})
		return
	}
	s.ints.AscendGreaterOrEqual(intItem{from, math.MinInt64}, func(it intItem) bool {
		if it.k > to {
			return false
		}
		return visit(it)
	})
}

// intFloor is the least int key a lower bound lets in; ok false when it
// lets none in (cmpKeys ranks text and the like above every number, null
// and bools below).
func intFloor(b bound) (int64, bool) {
	if !b.set {
		return math.MinInt64, true
	}
	switch x := b.key.(type) {
	case int64:
		if b.inclusive {
			return x, true
		}
		return x + 1, x != math.MaxInt64
	case float64:
		switch {
		case x != x:
			return 0, false
		case x >= 9.223372036854775807e18:
			return 0, false
		case x < -9.223372036854775807e18:
			return math.MinInt64, true
		}
		c := math.Ceil(x)
		if c == x && !b.inclusive {
			c++
		}
		return int64(c), true
	}
	return math.MinInt64, cmpRank(b.key) < 2
}

// intCeil is the greatest int key an upper bound lets in.
func intCeil(b bound) (int64, bool) {
	if !b.set {
		return math.MaxInt64, true
	}
	switch x := b.key.(type) {
	case int64:
		if b.inclusive {
			return x, true
		}
		return x - 1, x != math.MinInt64
	case float64:
		switch {
		case x != x:
			return 0, false
		case x >= 9.223372036854775807e18:
			return math.MaxInt64, true
		case x < -9.223372036854775807e18:
			return 0, false
		}
		f := math.Floor(x)
		if f == x && !b.inclusive {
			f--
		}
		return int64(f), true
	}
	return math.MaxInt64, cmpRank(b.key) > 2
}
