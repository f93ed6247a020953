package fql

import (
	"math"
	"strings"
)

// maxTTLms bounds @ttl at about a hundred years.
const maxTTLms = 100 * 365 * 86400000

var durationUnits = map[string]int64{"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000}

// annot parses one annotation, '@' included.
func (p *parser) annot() Annot {
	at := p.expect("@", "before an annotation").pos
	name := p.ident("an annotation name after '@' (hash, unique, sorted, text, ttl, hnsw)")
	a := Annot{At: at}
	switch strings.ToLower(name.val) {
	case "hash":
		a.Kind = AnnotHash
	case "unique":
		a.Kind = AnnotUnique
	case "sorted":
		a.Kind = AnnotSorted
	case "text":
		a.Kind, a.K1, a.B = AnnotText, DefaultK1, DefaultB
		if p.tok.is("(") {
			p.textParams(&a)
		}
	case "ttl":
		a.Kind = AnnotTTL
		p.expect("(", "after @ttl")
		a.TTLms = p.duration()
		p.expect(")", "after the @ttl duration")
	case "hnsw":
		a.Kind = AnnotHNSW
		p.hnswParams(&a)
	default:
		p.fail(at, "unknown annotation @%s (hash, unique, sorted, text, ttl, hnsw)", name.val)
	}
	return a
}

// namedParams parses NAME = NUMBER, ... and the closing ')', calling set
// for each; set fails on a name it does not know. A name given twice is an
// error. With comma, each parameter, the first too, follows a ','.
func (p *parser) namedParams(of string, comma bool, set func(name token, v float64, pos int)) {
	seen := map[string]bool{}
	for !comma || p.accept(",") {
		comma = true
		name := p.ident("a parameter name in " + of)
		key := strings.ToLower(name.val)
		if seen[key] {
			p.fail(name.pos, "%s given twice in %s", name.val, of)
		}
		seen[key] = true
		p.expect("=", "after "+name.val)
		v, pos := p.number("a number for " + name.val)
		set(name, v, pos)
	}
	p.expect(")", "after the parameters of "+of)
}

func (p *parser) textParams(a *Annot) {
	p.advance() // (
	if p.accept(")") {
		return
	}
	p.namedParams("@text", false, func(name token, v float64, pos int) {
		switch strings.ToLower(name.val) {
		case "k1":
			if !(v > 0 && v <= 100) {
				p.fail(pos, "k1 must be above 0 and at most 100")
			}
			a.K1 = v
		case "b":
			if !(v >= 0 && v <= 1) {
				p.fail(pos, "b must be between 0 and 1")
			}
			a.B = v
		default:
			p.fail(name.pos, "unknown @text parameter %s (k1, b)", name.val)
		}
	})
}

func (p *parser) hnswParams(a *Annot) {
	p.expect("(", "after @hnsw")
	m := p.ident("a metric (cosine, l2 or dot)")
	switch strings.ToLower(m.val) {
	case MetricCosine, MetricL2, MetricDot:
		a.Metric = strings.ToLower(m.val)
	default:
		p.fail(m.pos, "unknown metric %s (cosine, l2 or dot)", m.describe())
	}
	a.M, a.EfConstruction, a.EfSearch = DefaultM, DefaultEfConstruction, DefaultEfSearch
	p.namedParams("@hnsw", true, func(name token, v float64, pos int) {
		key := strings.ToLower(name.val)
		lo, hi := 1.0, 10000.0
		var dst *int
		switch key {
		case "m":
			lo, hi, dst = 2, 256, &a.M
		case "ef_construction":
			dst = &a.EfConstruction
		case "ef_search":
			dst = &a.EfSearch
		default:
			p.fail(name.pos, "unknown @hnsw parameter %s (m, ef_construction, ef_search)", name.val)
		}
		if v != math.Trunc(v) || v < lo || v > hi {
			p.fail(pos, "%s must be a whole number between %g and %g", key, lo, hi)
		}
		*dst = int(v)
	})
}

// duration parses NUMBER UNIT with the unit written right after the
// number (30m, 1.5h, 500ms) and returns whole milliseconds.
func (p *parser) duration() int64 {
	num := p.tok
	v, pos := p.number("a duration (a number and ms, s, m, h or d)")
	unit := p.tok
	ms, ok := durationUnits[strings.ToLower(unit.val)]
	if unit.kind != tIdent || unit.pos != num.end || !ok {
		p.fail(unit.pos, "expected a unit (ms, s, m, h or d) right after %s, found %s", cutText(num.val), unit.describe())
	}
	p.advance()
	total := v * float64(ms)
	if total != math.Trunc(total) || total < 1 || total > maxTTLms {
		p.fail(pos, "a duration must be a whole number of milliseconds between 1ms and 100 years")
	}
	return int64(total)
}
