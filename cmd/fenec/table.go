package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// column is one column of a table: its header and how a row's cell is
// read.
type column struct {
	header string
	cell   func(row map[string]any) string
}

// field is a column showing the row's value under key ("-" when absent).
func field(header, key string) column {
	return column{header: header, cell: func(row map[string]any) string { return cellText(row[key]) }}
}

// flag is a column showing "yes" when the row's key is true.
func flagCol(header, key string) column {
	return column{header: header, cell: func(row map[string]any) string {
		if b, _ := row[key].(bool); b {
			return "yes"
		}
		return "-"
	}}
}

// ms is a column showing a count of milliseconds as seconds.
func msCol(header, key string) column {
	return column{header: header, cell: func(row map[string]any) string {
		f, ok := row[key].(float64)
		if !ok {
			return "-"
		}
		return strconv.FormatFloat(f/1000, 'f', 2, 64) + "s"
	}}
}

// cellText shows one JSON value in a cell.
func cellText(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		if v == "" {
			return "-"
		}
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// printTable writes rows under the columns' headers, aligned.
func printTable(w io.Writer, cols []column, rows []map[string]any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for _, row := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = strings.ReplaceAll(c.cell(row), "\t", " ")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// decodeRows reads a JSON array of objects.
func decodeRows(b []byte) ([]map[string]any, error) {
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("the router's answer is not a list: %w", err)
	}
	return rows, nil
}

// keysOf is every key of rows, first seen first, with first put ahead.
func keysOf(rows []map[string]any, first ...string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, k := range first {
		seen[k] = true
	}
	for _, row := range rows {
		var ks []string
		for k := range row {
			if !seen[k] {
				ks = append(ks, k)
			}
		}
		slices.Sort(ks) // a JSON object's keys have no order of their own
		for _, k := range ks {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	var out []string
	for _, k := range first {
		for _, row := range rows {
			if _, ok := row[k]; ok {
				out = append(out, k)
				break
			}
		}
	}
	return append(out, keys...)
}
