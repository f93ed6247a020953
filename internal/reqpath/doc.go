// Package reqpath checks a request's path before any route reads it, the
// same way on a node's data path (/t/) and on the control surfaces
// (/_admin/, /_shard/): a path is read one way only, so a rule a proxy
// in front applies to the path it sees is the rule the server applies.
//
// It refuses what could be read two ways: an encoded separator or dot
// (%2f, %5c, %2e) or NUL, a backslash, a "." or ".." segment, an empty
// segment ("//"), and any percent-encoding in the first segment or below
// a control prefix (a segment starting with "_"), where every name is
// plain. It is not a router: callers route on the segments it returns.
package reqpath
