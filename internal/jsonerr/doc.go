// Package jsonerr says what is wrong with a JSON request body in the
// API's own terms: the field as the body names it, the JSON type it takes
// and the one it was given, where the text stops being JSON. What
// encoding/json says itself names Go types and Go structs ("cannot
// unmarshal string into Go struct field queryBody.params of type
// []interface {}"), which mean nothing to a client and tell it how the
// server is built; node and router answer with Describe instead.
//
// Marshal encodes an answer with <, > and & as they are, so a message
// about vector<3> says vector<3> rather than vector\u003c3\u003e.
//
// Decode is the one reading of a request's JSON body every route of node
// and router uses: one value and nothing after it, no key twice in an
// object (FirstDuplicate's walk, which follows the Go type decoded into so
// that "to" and "TO" naming one field count as the same key), its error
// phrased by Describe. Describe stays usable on its own for the errors of
// decoders that are not request bodies'.
package jsonerr
