// Package merge is the cross-tenant read's merge: it takes each tenant's
// rows, as their nodes answered them, and merges them by the rule the
// request states. The rule names fields of the rows and is all it knows of
// them:
//
//   - {"concat": true}: every tenant's rows, one tenant after another in
//     the order named.
//   - {"order": [{"field", "desc"}], "limit": N}: the first N rows of a
//     k-way merge. Each tenant's query must already order its rows by the
//     same keys (and should carry the same limit): a tenant whose rows are
//     not in that order is listed as failed rather than merged wrongly.
//     Values compare as the engine's do: null (or missing) first, then
//     false, true, numbers as numbers, strings as strings, then anything
//     else by its JSON text; desc reverses the whole order. Ties go to the
//     tenant named first.
//   - {"group": [keys], "sum": [...], "count": "n", "min": [...], "max":
//     [...]}: one row per distinct value of the keys over every tenant's
//     rows (the key "_tenant" groups by tenant), holding the keys, the
//     count under its name, "sum", "min" and "max" as objects by field
//     (nulls and missing fields left out; a sum of no number is null), and
//     "_tenants", the tenants whose rows fell in it; groups by their keys.
//     An average is sum over count.
//
// Every merged row but a group's carries "_tenant" (replacing a field of
// that name). A merged answer holds at most MaxRows rows.
//
// It is pure: no I/O, no clock, nothing of the router. Reading the
// tenants, and what a tenant's read may cost, are the control plane's
// (region/query.go).
package merge
