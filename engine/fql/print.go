package fql

import (
	"strconv"
	"strings"
)

// This file prints the AST back as canonical FenecQL: lower-case keywords,
// one space between tokens, parentheses only where precedence needs them,
// parameters left out where they have their default. Parse(s.String())
// gives the same AST as s, positions aside.

// String returns the path as written: segments joined by dots.
func (p Path) String() string { return strings.Join(p, ".") }

// String returns the type as written in create collection.
func (t Type) String() string {
	switch t.Kind {
	case TypeBool:
		return "bool"
	case TypeInt:
		return "int"
	case TypeFloat:
		return "float"
	case TypeText:
		return "text"
	case TypeTimestamp:
		return "timestamp"
	case TypeJSON:
		return "json"
	case TypeVector:
		return "vector<" + strconv.Itoa(t.Dim) + ">"
	case TypeTextList:
		return "[text]"
	case TypeIntList:
		return "[int]"
	case TypeFloatList:
		return "[float]"
	}
	return "?type"
}

// String returns the annotation as written, @ included.
func (a Annot) String() string {
	switch a.Kind {
	case AnnotHash:
		return "@hash"
	case AnnotUnique:
		return "@unique"
	case AnnotSorted:
		return "@sorted"
	case AnnotText:
		var ps []string
		if a.K1 != DefaultK1 {
			ps = append(ps, "k1="+formatFloat(a.K1))
		}
		if a.B != DefaultB {
			ps = append(ps, "b="+formatFloat(a.B))
		}
		if len(ps) == 0 {
			return "@text"
		}
		return "@text(" + strings.Join(ps, ", ") + ")"
	case AnnotTTL:
		return "@ttl(" + formatDuration(a.TTLms) + ")"
	case AnnotHNSW:
		ps := []string{a.Metric}
		if a.M != DefaultM {
			ps = append(ps, "m="+strconv.Itoa(a.M))
		}
		if a.EfConstruction != DefaultEfConstruction {
			ps = append(ps, "ef_construction="+strconv.Itoa(a.EfConstruction))
		}
		if a.EfSearch != DefaultEfSearch {
			ps = append(ps, "ef_search="+strconv.Itoa(a.EfSearch))
		}
		return "@hnsw(" + strings.Join(ps, ", ") + ")"
	}
	return "@?"
}

// formatDuration writes ms in the largest unit that divides it.
func formatDuration(ms int64) string {
	units := []struct {
		n    int64
		name string
	}{{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}}
	for _, u := range units {
		if ms != 0 && ms%u.n == 0 {
			return strconv.FormatInt(ms/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

// String returns the field definition as written in create collection.
func (f FieldDef) String() string {
	var b strings.Builder
	b.WriteString(f.Name)
	b.WriteByte(' ')
	b.WriteString(f.Type.String())
	if f.Required {
		b.WriteString(" required")
	}
	for _, a := range f.Annots {
		b.WriteByte(' ')
		b.WriteString(a.String())
	}
	return b.String()
}

func (n *CreateCollection) String() string {
	var b strings.Builder
	b.WriteString("create collection ")
	if n.IfNotExists {
		b.WriteString("if not exists ")
	}
	b.WriteString(n.Name)
	b.WriteString(" (")
	for i, f := range n.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.String())
	}
	b.WriteByte(')')
	return b.String()
}

func (n *DropCollection) String() string {
	if n.IfExists {
		return "drop collection if exists " + n.Name
	}
	return "drop collection " + n.Name
}

func (n *Compact) String() string { return "compact" }

func (n *CreateIndex) String() string {
	return "create index on " + n.Coll + " (" + n.Field + ") " + n.Annot.String()
}

func (n *Put) String() string {
	s := "put " + n.Coll + " " + exprString(n.Docs)
	if n.IfAbsent {
		s += " if absent"
	}
	return s + requireString(n.Require)
}

func (n *Insert) String() string {
	return "insert " + n.Coll + " " + exprString(n.Docs) + requireString(n.Require)
}

func requireString(r *int64) string {
	if r == nil {
		return ""
	}
	return " require " + strconv.FormatInt(*r, 10)
}

func (n *Set) String() string {
	var b strings.Builder
	b.WriteString("set ")
	b.WriteString(n.Coll)
	b.WriteString(" {")
	for i, a := range n.Assigns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(keyString(a.Field))
		b.WriteString(": ")
		b.WriteString(exprString(a.Value))
	}
	b.WriteByte('}')
	writeWhereOrderLimit(&b, n.Where, n.Order, n.Limit)
	writeReturning(&b, n.Returning)
	b.WriteString(requireString(n.Require))
	return b.String()
}

func (n *Del) String() string {
	var b strings.Builder
	b.WriteString("del ")
	b.WriteString(n.Coll)
	writeWhereOrderLimit(&b, n.Where, n.Order, n.Limit)
	writeReturning(&b, n.Returning)
	b.WriteString(requireString(n.Require))
	return b.String()
}

func writeWhereOrderLimit(b *strings.Builder, where Expr, order []OrderKey, limit *int64) {
	if where != nil {
		b.WriteString(" where ")
		b.WriteString(exprString(where))
	}
	writeOrder(b, order)
	if limit != nil {
		b.WriteString(" limit ")
		b.WriteString(strconv.FormatInt(*limit, 10))
	}
}

func writeOrder(b *strings.Builder, order []OrderKey) {
	if len(order) == 0 {
		return
	}
	b.WriteString(" order ")
	for i, k := range order {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k.Name())
		if k.Desc {
			b.WriteString(" desc")
		}
	}
}

func writeReturning(b *strings.Builder, r *Returning) {
	if r == nil {
		return
	}
	b.WriteString(" returning ")
	if r.Star {
		b.WriteByte('*')
		return
	}
	for i, p := range r.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
}

func writeSelect(b *strings.Builder, items []SelectItem) {
	if len(items) == 0 {
		return
	}
	b.WriteString(" select ")
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(aggString(it.Agg, it.Star, it.Path))
		if it.Alias != "" {
			b.WriteString(" as ")
			b.WriteString(it.Alias)
		}
	}
}

// String returns the aggregate's name as written: count, sum, avg, min,
// max ("" for AggNone).
func (a AggKind) String() string {
	switch a {
	case AggCount:
		return "count"
	case AggSum:
		return "sum"
	case AggAvg:
		return "avg"
	case AggMin:
		return "min"
	case AggMax:
		return "max"
	}
	return ""
}

func aggString(agg AggKind, star bool, p Path) string {
	arg := p.String()
	if star {
		arg = "*"
	}
	if agg == AggNone {
		return arg
	}
	return agg.String() + "(" + arg + ")"
}

// Name is the key of this item in an answer row: the alias when there is
// one, else the path as written ("a.b"), "*" for every field, or the
// aggregate as written ("count(*)", "sum(total)").
func (s SelectItem) Name() string {
	if s.Alias != "" {
		return s.Alias
	}
	return aggString(s.Agg, s.Star, s.Path)
}

// Name is the key as written, without desc: a path ("total", "_score", an
// alias) or an aggregate ("count(*)", "sum(total)"), the same text as the
// SelectItem.Name of an unaliased select item it names.
func (k OrderKey) Name() string { return aggString(k.Agg, k.Star, k.Path) }

func (n *Get) String() string {
	var b strings.Builder
	b.WriteString("get ")
	b.WriteString(n.Coll)
	writeSelect(&b, n.Select)
	if n.Where != nil {
		b.WriteString(" where ")
		b.WriteString(exprString(n.Where))
	}
	if m := n.Match; m != nil {
		b.WriteString(" match " + m.Field + " " + exprString(m.Query))
	}
	if v := n.Near; v != nil {
		b.WriteString(" near " + v.Field + " " + exprString(v.Vector))
		if v.Ef != 0 {
			b.WriteString(" ef " + strconv.Itoa(v.Ef))
		}
		if v.Exact {
			b.WriteString(" exact")
		}
	}
	if f := n.Fuse; f != nil {
		b.WriteString(" fuse")
		if f.K != DefaultFuseK {
			b.WriteString(" k=" + strconv.Itoa(f.K))
		}
	}
	if len(n.Group) > 0 {
		b.WriteString(" group ")
		for i, p := range n.Group {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.String())
		}
	}
	writeOrder(&b, n.Order)
	if n.Limit != nil {
		b.WriteString(" limit " + strconv.FormatInt(*n.Limit, 10))
	}
	if n.Offset != 0 {
		b.WriteString(" offset " + strconv.FormatInt(n.Offset, 10))
	}
	if n.Count {
		b.WriteString(" count")
	}
	for l := n.Lookup; l != nil; l = l.Lookup {
		b.WriteString(" lookup " + l.Child + " on " + l.On)
		if l.Required {
			b.WriteString(" required")
		}
		writeSelect(&b, l.Select)
		writeWhereOrderLimit(&b, l.Where, l.Order, l.Limit)
	}
	return b.String()
}
