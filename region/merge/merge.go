package merge

import (
	"container/heap"
	"fmt"
	"slices"

	"github.com/fenec-go/fenec/engine/fql"
)

// tenantField is the field each merged row carries naming its tenant (it
// replaces a field of that name in the tenant's row); tenantsField lists
// the tenants whose rows fell in a group.
const (
	tenantField  = "_tenant"
	tenantsField = "_tenants"
)

// Rule is the request's "merge": exactly one of concat, order (with
// an optional limit) or group (with its aggregates). The rule names the
// fields of the answers' rows; the query itself is never read.
type Rule struct {
	Concat bool      `json:"concat,omitempty"`
	Order  []Key     `json:"order,omitempty"`
	Limit  *int      `json:"limit,omitempty"`
	Group  *[]string `json:"group,omitempty"`
	Sum    []string  `json:"sum,omitempty"`
	Count  string    `json:"count,omitempty"`
	Min    []string  `json:"min,omitempty"`
	Max    []string  `json:"max,omitempty"`
}

// Key is one key of an order merge.
type Key struct {
	Field string `json:"field"`
	Desc  bool   `json:"desc,omitempty"`
}

// Check reports a rule that is not exactly one of the three, or names no
// field where it must.
func (m Rule) Check() error {
	kinds := 0
	for _, on := range []bool{m.Concat, len(m.Order) > 0, m.Group != nil} {
		if on {
			kinds++
		}
	}
	if kinds != 1 {
		return fmt.Errorf("%w: merge is one of concat, order or group", ErrBadRule)
	}
	if m.Limit != nil && (len(m.Order) == 0 || *m.Limit < 0 || *m.Limit > MaxRows) {
		return fmt.Errorf("%w: limit goes with order, 0 to %d", ErrBadRule, MaxRows)
	}
	if m.Group == nil && (m.Sum != nil || m.Count != "" || m.Min != nil || m.Max != nil) {
		return fmt.Errorf("%w: sum, count, min and max go with group", ErrBadRule)
	}
	for _, k := range m.Order {
		if k.Field == "" {
			return fmt.Errorf("%w: an order key names no field", ErrBadRule)
		}
	}
	if m.Group != nil {
		return m.checkGroup()
	}
	return nil
}

// checkGroup refuses empty field names and a group key that would collide
// with the names the answer's rows use.
func (m Rule) checkGroup() error {
	taken := map[string]bool{"sum": true, "min": true, "max": true, tenantsField: true}
	if m.Count != "" {
		taken[m.Count] = true
	}
	for _, lists := range [][]string{m.Sum, m.Min, m.Max} {
		for _, f := range lists {
			if f == "" {
				return fmt.Errorf("%w: an aggregate names no field", ErrBadRule)
			}
		}
	}
	for _, k := range *m.Group {
		if k == "" || taken[k] {
			return fmt.Errorf("%w: group key %q is empty or names an answer field (sum, min, max, %s, the count)", ErrBadRule, k, tenantsField)
		}
		taken[k] = true
	}
	return nil
}

// fits reports rows that an order merge cannot take: not in its order.
// For an order merge it makes each row's keys ready to compare, once.
func (m Rule) fits(r *Read) error {
	if len(m.Order) == 0 {
		return nil
	}
	r.keys = make([][]any, len(r.Rows))
	flat := make([]any, len(r.Rows)*len(m.Order))
	for i, row := range r.Rows {
		k := flat[i*len(m.Order) : (i+1)*len(m.Order)]
		for j, o := range m.Order {
			k[j] = row[o.Field]
		}
		r.keys[i] = k
		if i > 0 && m.compareKeys(r.keys[i-1], k) > 0 {
			r.keys = nil
			return fmt.Errorf("%w: row %d", ErrOutOfOrder, i)
		}
	}
	return nil
}

// merge merges the rows of the reads that succeeded, in their order.
func (m Rule) merge(reads []Read) ([]map[string]any, error) {
	switch {
	case m.Concat:
		return mergeConcat(reads)
	case len(m.Order) > 0:
		return m.mergeOrder(reads)
	default:
		return m.mergeGroup(reads)
	}
}

// withTenant is row with its tenant named.
func withTenant(row map[string]any, tenant string) map[string]any {
	row[tenantField] = tenant
	return row
}

// tooMany is the refusal of an answer past the bound.
func tooMany(n int) error {
	return fmt.Errorf("%w: %d rows, at most %d (narrow the query or give a limit)", ErrTooManyRows, n, MaxRows)
}

// mergeConcat answers every tenant's rows, one tenant after another.
func mergeConcat(reads []Read) ([]map[string]any, error) {
	total := 0
	for _, r := range reads {
		if r.Err == nil {
			total += len(r.Rows)
		}
	}
	if total > MaxRows {
		return nil, tooMany(total)
	}
	out := make([]map[string]any, 0, total)
	for _, r := range reads {
		if r.Err != nil {
			continue
		}
		for _, row := range r.Rows {
			out = append(out, withTenant(row, r.Tenant))
		}
	}
	return out, nil
}

// cursor is one tenant's place in an order merge.
type cursor struct {
	tenant int // index in reads: ties go to the tenant named first
	rows   []map[string]any
	keys   [][]any // each row's keys, from fits
	next   int
}

// cursorHeap is the order merge's heap of tenants with rows left.
type cursorHeap struct {
	m    *Rule
	cs   []*cursor
	name []string
}

func (h *cursorHeap) Len() int { return len(h.cs) }
func (h *cursorHeap) Less(i, j int) bool {
	a, b := h.cs[i], h.cs[j]
	if c := h.m.compareKeys(a.keys[a.next], b.keys[b.next]); c != 0 {
		return c < 0
	}
	return a.tenant < b.tenant
}
func (h *cursorHeap) Swap(i, j int) { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *cursorHeap) Push(x any)    { h.cs = append(h.cs, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	c := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return c
}

// mergeOrder answers the first rows of a k-way merge of the tenants' rows
// (each already in the order), up to the limit; with no limit, all of
// them, which must fit the bound.
func (m Rule) mergeOrder(reads []Read) ([]map[string]any, error) {
	h := &cursorHeap{m: &m}
	total := 0
	for i, r := range reads {
		h.name = append(h.name, r.Tenant)
		if r.Err == nil && len(r.Rows) > 0 {
			h.cs = append(h.cs, &cursor{tenant: i, rows: r.Rows, keys: r.keys})
			total += len(r.Rows)
		}
	}
	limit := total
	if m.Limit != nil {
		limit = min(*m.Limit, total)
	} else if total > MaxRows {
		return nil, tooMany(total)
	}
	heap.Init(h)
	out := make([]map[string]any, 0, limit)
	for len(out) < limit {
		c := h.cs[0]
		out = append(out, withTenant(c.rows[c.next], h.name[c.tenant]))
		c.next++
		if c.next == len(c.rows) {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return out, nil
}

// compareKeys orders two rows' keys by the rule's order, each key by the
// engine's order (fql.SortCompare).
func (m *Rule) compareKeys(a, b []any) int {
	for i, k := range m.Order {
		c := fql.SortCompare(a[i], b[i])
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// group is one group's running aggregates.
type group struct {
	keys    []any
	count   int64
	sums    []sum
	mins    []any
	maxs    []any
	tenants map[string]bool
}

// mergeGroup answers one row per distinct value of the group keys over
// every tenant's rows: the keys, the count, and the sums, minimums and
// maximums of the named fields (nulls and missing fields left out of
// them), with the tenants whose rows fell in it; groups by their keys.
func (m Rule) mergeGroup(reads []Read) ([]map[string]any, error) {
	keys := *m.Group
	groups := map[string]*group{}
	for _, r := range reads {
		if r.Err != nil {
			continue
		}
		for _, row := range r.Rows {
			vals := make([]any, len(keys))
			for i, k := range keys {
				if k == tenantField {
					vals[i] = r.Tenant
				} else {
					vals[i] = row[k]
				}
			}
			id := groupKey(vals)
			g := groups[id]
			if g == nil {
				if len(groups) == MaxRows {
					return nil, tooMany(MaxRows + 1)
				}
				g = &group{keys: vals, sums: make([]sum, len(m.Sum)), mins: make([]any, len(m.Min)),
					maxs: make([]any, len(m.Max)), tenants: map[string]bool{}}
				groups[id] = g
			}
			m.fold(g, row, r.Tenant)
		}
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		list = append(list, g)
	}
	slices.SortFunc(list, func(a, b *group) int {
		for i := range a.keys {
			if c := fql.SortCompare(a.keys[i], b.keys[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	out := make([]map[string]any, 0, len(list))
	for _, g := range list {
		out = append(out, m.groupRow(keys, g))
	}
	return out, nil
}

// fold adds one row to its group.
func (m Rule) fold(g *group, row map[string]any, tenant string) {
	g.count++
	g.tenants[tenant] = true
	for i, f := range m.Sum {
		g.sums[i].add(row[f])
	}
	for i, f := range m.Min {
		if v := row[f]; v != nil && (g.mins[i] == nil || fql.SortCompare(v, g.mins[i]) < 0) {
			g.mins[i] = v
		}
	}
	for i, f := range m.Max {
		if v := row[f]; v != nil && (g.maxs[i] == nil || fql.SortCompare(v, g.maxs[i]) > 0) {
			g.maxs[i] = v
		}
	}
}

// groupRow is a group as an answer row.
func (m Rule) groupRow(keys []string, g *group) map[string]any {
	row := make(map[string]any, len(keys)+5)
	for i, k := range keys {
		row[k] = g.keys[i]
	}
	if m.Count != "" {
		row[m.Count] = g.count
	}
	if len(m.Sum) > 0 {
		s := make(map[string]any, len(m.Sum))
		for i, f := range m.Sum {
			s[f] = g.sums[i].value()
		}
		row["sum"] = s
	}
	for _, agg := range []struct {
		name   string
		fields []string
		vals   []any
	}{{"min", m.Min, g.mins}, {"max", m.Max, g.maxs}} {
		if len(agg.fields) == 0 {
			continue
		}
		x := make(map[string]any, len(agg.fields))
		for i, f := range agg.fields {
			x[f] = agg.vals[i]
		}
		row[agg.name] = x
	}
	tenants := make([]string, 0, len(g.tenants))
	for t := range g.tenants {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	row[tenantsField] = tenants
	return row
}
