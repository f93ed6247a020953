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
//     Values compare by the engine's own order, the one its order clause
//     sorts by (fql.SortCompare): null or missing first, then false and
//     true, numbers (int and float exactly, by value), text by its UTF-8
//     bytes, lists element by element (shorter first on a tie), objects by
//     their sorted keys and values; desc reverses the whole order. Ties go
//     to the tenant named first.
//   - {"group": [keys], "sum": [...], "count": "n", "min": [...], "max":
//     [...]}: one row per distinct value of the keys over every tenant's
//     rows (the key "_tenant" groups by tenant), holding the keys, the
//     count under its name, "sum", "min" and "max" as objects by field
//     (nulls and missing fields left out; a sum of no number is null), and
//     "_tenants", the tenants whose rows fell in it; groups by their keys.
//     Keys a tenant's own group holds equal (fql.GroupEqual: 1 and 1.0,
//     [1] and [1.0], {a: 1} and {a: 1.0}) are one group, so a group
//     across tenants is the group one tenant holding the rows makes;
//     minimums, maximums and the groups' order are the engine's order too. An average is sum over count.
//
// Every merged row but a group's carries "_tenant" (replacing a field of
// that name). A merged answer holds at most MaxRows rows.
//
// It is pure: no I/O, no clock, nothing of the router; of the engine it
// takes only its values' normalisation and order (engine/fql). Reading the
// tenants, and what a tenant's read may cost, are the control plane's
// (region/query.go).
package merge
