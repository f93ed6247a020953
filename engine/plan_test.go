package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestIndexedEqualsScan runs random queries against two collections with
// the same rows, one with every index and one with none: the answers must
// be identical, before and after random writes.
func TestIndexedEqualsScan(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { indexedEqualsScan(t, seed) })
	}
}

func indexedEqualsScan(t *testing.T, seed uint64) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection ix (n int @sorted, s text @hash, u int @unique, f float @sorted, b bool @hash, t text @sorted)")
	mustExec(t, db, "create collection sc (n int, s text, u int, f float, b bool, t text)")
	rng := rand.New(rand.NewPCG(7, seed))
	randDoc := func(i int) string {
		parts := []string{fmt.Sprintf("u: %d", i)}
		if rng.IntN(8) > 0 {
			parts = append(parts, fmt.Sprintf("n: %d", rng.IntN(40)-5))
		}
		if rng.IntN(8) > 0 {
			parts = append(parts, fmt.Sprintf("s: 's%d'", rng.IntN(6)))
		}
		if rng.IntN(8) > 0 {
			parts = append(parts, fmt.Sprintf("f: %g", float64(rng.IntN(80))/4-3))
		}
		if rng.IntN(4) > 0 {
			parts = append(parts, fmt.Sprintf("b: %v", rng.IntN(2) == 0))
		}
		if rng.IntN(6) > 0 {
			parts = append(parts, fmt.Sprintf("t: '%c%c'", 'a'+rng.IntN(4), 'a'+rng.IntN(4)))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	var docs []string
	for i := range 400 {
		docs = append(docs, randDoc(i))
	}
	for _, c := range []string{"ix", "sc"} {
		mustExec(t, db, "put "+c+" ["+strings.Join(docs, ", ")+"]")
	}
	randValue := func(field string) string {
		switch field {
		case "n", "u", "id":
			if rng.IntN(10) == 0 {
				return fmt.Sprintf("%g", float64(rng.IntN(80))/2-5) // a float against an int field
			}
			return fmt.Sprint(rng.IntN(45) - 5)
		case "f":
			if rng.IntN(3) == 0 {
				return fmt.Sprint(rng.IntN(20) - 3)
			}
			return fmt.Sprintf("%g", float64(rng.IntN(80))/4-3)
		case "s":
			return fmt.Sprintf("'s%d'", rng.IntN(7))
		case "b":
			return fmt.Sprint(rng.IntN(2) == 0)
		case "t":
			return fmt.Sprintf("'%c%c'", 'a'+rng.IntN(4), 'a'+rng.IntN(4))
		}
		return "null"
	}
	fields := []string{"n", "s", "u", "f", "b", "t", "id"}
	randCond := func() string {
		f := fields[rng.IntN(len(fields))]
		switch rng.IntN(9) {
		case 0:
			return f + " in (" + randValue(f) + ", " + randValue(f) + ", " + randValue(f) + ")"
		case 1:
			return f + " is null"
		case 2:
			return f + " != " + randValue(f)
		case 3:
			return randValue(f) + " < " + f
		case 4:
			return "not " + f + " = " + randValue(f)
		case 5:
			return f + " = null"
		}
		return f + " " + []string{"=", "<", "<=", ">", ">="}[rng.IntN(5)] + " " + randValue(f)
	}
	randWhere := func() string {
		var cs []string
		for range 1 + rng.IntN(3) {
			c := randCond()
			if rng.IntN(5) == 0 {
				c = "(" + c + " or " + randCond() + ")"
			}
			cs = append(cs, c)
		}
		return strings.Join(cs, " and ")
	}
	randTail := func() string {
		s := ""
		if rng.IntN(2) == 0 {
			var keys []string
			for range 1 + rng.IntN(2) {
				k := fields[rng.IntN(len(fields))]
				if rng.IntN(2) == 0 {
					k += " desc"
				}
				keys = append(keys, k)
			}
			s += " order " + strings.Join(keys, ", ")
		}
		if rng.IntN(2) == 0 {
			s += fmt.Sprintf(" limit %d", rng.IntN(30))
			if rng.IntN(2) == 0 {
				s += fmt.Sprintf(" offset %d", rng.IntN(20))
			}
		}
		return s
	}
	check := func(round int) {
		for range 250 {
			q := "where " + randWhere()
			if rng.IntN(6) == 0 {
				q = ""
			}
			tail := randTail()
			if rng.IntN(5) == 0 {
				tail = " count"
			}
			a := mustExec(t, db, "get ix "+q+tail)
			b := mustExec(t, db, "get sc "+q+tail)
			if a != b {
				t.Fatalf("round %d: get %s%s\nindexed: %.400s\nscanned: %.400s", round, q, tail, a, b)
			}
		}
	}
	check(0)
	next := 1000
	for round := 1; round <= 3; round++ {
		for range 30 {
			w := randWhere()
			var stmt string
			switch rng.IntN(3) {
			case 0:
				stmt = fmt.Sprintf("set %%s {n: %d, s: %s, t: %s} where %s", rng.IntN(40), randValue("s"), randValue("t"), w)
			case 1:
				stmt = "del %s where " + w + randTail()
			default:
				next++
				stmt = "put %s " + randDoc(next)
			}
			ra := execErr(t, db, fmt.Sprintf(stmt, "ix"))
			rb := execErr(t, db, fmt.Sprintf(stmt, "sc"))
			if (ra == nil) != (rb == nil) {
				t.Fatalf("%s: indexed %v, scanned %v", stmt, ra, rb)
			}
		}
		check(round)
	}
}

// TestRangeBounds checks bounds on one field combined every way, counted
// through the index and scanned.
func TestRangeBounds(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection ix (n int @sorted, f float @sorted)")
	mustExec(t, db, "create collection sc (n int, f float)")
	for i := range 10 {
		for _, c := range []string{"ix", "sc"} {
			mustExec(t, db, "put "+c+" {n: $1, f: $2}", i, float64(i)/2)
		}
	}
	ops := []string{"<", "<=", ">", ">=", "="}
	vals := []string{"3", "3.0", "3.5", "5", "'x'", "null", "-1", "100"}
	for _, f := range []string{"n", "f", "id"} {
		for _, o1 := range ops {
			for _, o2 := range ops {
				for _, v1 := range vals {
					for _, v2 := range []string{"3", "5", "3.5"} {
						w := fmt.Sprintf("where %s %s %s and %s %s %s", f, o1, v1, f, o2, v2)
						for _, tail := range []string{" count", " order " + f + " desc limit 3"} {
							// 'x' against a number field is refused, indexed
							// or not (TestWhereComparesAgainstTheFieldsType).
							a := answerOrRefusal(t, db, "get ix "+w+tail)
							b := answerOrRefusal(t, db, "get sc "+w+tail)
							if a != b {
								t.Fatalf("get %s%s: indexed %s, scanned %s", w, tail, a, b)
							}
						}
					}
				}
			}
		}
	}
}

// Numbers past 2^53, where an int and the float nearest it differ: an
// index on a float field bounded by an int (and an int field by a float)
// answers as the scan does, which compares them exactly.
func TestIndexedEqualsScanPastFloatPrecision(t *testing.T) {
	db, _ := newTestDB(t, Options{NoSweep: true})
	mustExec(t, db, "create collection ix (f float @sorted, h float @hash, n int @sorted, m int @hash)")
	mustExec(t, db, "create collection sc (f float, h float, n int, m int)")
	const row = "{f: 9007199254740992.0, h: 9007199254740992.0, n: 9007199254740993, m: 9007199254740993}"
	mustExec(t, db, "put ix "+row)
	mustExec(t, db, "put sc "+row)
	for _, w := range []string{
		"f >= 9007199254740993", "f > 9007199254740992", "f < 9007199254740993", "f <= 9007199254740991",
		"f = 9007199254740993", "h = 9007199254740993", "h = 9007199254740992", "h != 9007199254740993",
		"n <= 9007199254740992.0", "n > 9007199254740992.0", "n = 9007199254740992.0", "m = 9007199254740992.0",
		"f >= 9223372036854775807", "h = 9223372036854775807", "f > -9223372036854775808",
	} {
		a := mustExec(t, db, "get ix where "+w+" count")
		b := mustExec(t, db, "get sc where "+w+" count")
		if a != b {
			t.Errorf("where %s: indexed %s, scanned %s", w, a, b)
		}
	}
}

// answerOrRefusal is a statement's JSON answer, or "refused" if it is
// ErrType; any other error fails the test.
func answerOrRefusal(tb testing.TB, db *DB, q string) string {
	tb.Helper()
	res, _, err := db.Exec(context.Background(), Statement{Query: q})
	switch {
	case errors.Is(err, ErrType):
		return "refused"
	case err != nil:
		tb.Fatalf("%s: %v", q, err)
	}
	return string(res.JSON())
}
