package merge

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fenec-go/fenec/engine/fql"
)

// MaxRows bounds the rows of a merged answer: past it the read is refused
// (ErrTooManyRows), never cut short.
const MaxRows = 10000

// Read is what one tenant's read came to: its rows, decoded by DecodeRows
// (their values are the engine's), and the seq the read saw every write
// up to; or the error it failed with.
type Read struct {
	Tenant string
	Rows   []map[string]any
	Seq    uint64
	Err    error

	keys [][]any // each row's order keys (an order merge only)
}

// Outcome is a tenant's entry under "tenants" in the answer.
type Outcome struct {
	Seq   *uint64 `json:"seq,omitempty"`
	Rows  *int    `json:"rows,omitempty"`
	Error string  `json:"error,omitempty"`
}

// Result is the answer of a cross-tenant read.
type Result struct {
	Rows    []map[string]any   `json:"rows"`
	Tenants map[string]Outcome `json:"tenants"`
}

// Answer merges the reads that succeeded by rule, which Check passed, and
// lists every tenant with its seq or its error. A tenant whose rows do not
// fit the rule (out of its order) is listed as failed. The rows are the
// reads' own, each given its tenant's name.
func Answer(rule Rule, reads []Read) (Result, error) {
	for i := range reads {
		if reads[i].Err == nil {
			reads[i].Err = rule.fits(&reads[i])
		}
	}
	rows, err := rule.merge(reads)
	if err != nil {
		return Result{}, err
	}
	ans := Result{Rows: rows, Tenants: make(map[string]Outcome, len(reads))}
	for _, r := range reads {
		if r.Err != nil {
			ans.Tenants[r.Tenant] = Outcome{Error: r.Err.Error()}
			continue
		}
		seq, n := r.Seq, len(r.Rows)
		ans.Tenants[r.Tenant] = Outcome{Seq: &seq, Rows: &n}
	}
	return ans, nil
}

// DecodeRows reads an answer that must be a JSON array of objects, into
// the values the engine holds (fql.Normalize): a number that is an int64
// is one, any other a float64, as the node's engine had them, so that the
// merge compares what the engine compared. A value the engine cannot hold
// (a number past a float64's range) is ErrNotRows.
func DecodeRows(b []byte) ([]map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, ErrNotRows
	}
	rows := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		var row map[string]any
		if err := d.Decode(&row); err != nil || row == nil {
			return nil, ErrNotRows
		}
		for k, v := range row {
			n, err := fql.Normalize(v)
			if err != nil {
				return nil, fmt.Errorf("%w: field %s: %v", ErrNotRows, k, err)
			}
			row[k] = n
		}
		rows = append(rows, row)
	}
	return rows, nil
}
