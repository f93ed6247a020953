// Package audit is the audit log node and router share (--audit PATH):
// JSON lines appended to one file by one writer.
//
// A change — an admin change on a node, a /_shard/ change on a router, a
// forced operation — is written whole, one line each (Record). A refusal
// a stranger can cause at will — a missing or wrong token, an address
// held off, no client certificate — is counted (Refused): the first from
// a client in a window (a minute) is written whole, the rest of that
// window as one line at its end saying how many more there were and
// since when. So a flood of refusals costs at most two lines a client
// and a minute, and the clients counted in a window are bounded too
// (past them, one line for all the others).
//
// Every line is bounded (MaxLine): each text field is cut at a bound
// with a marker saying how much was cut, control characters are
// replaced, and nothing is escaped for HTML. A path of 120 KB is written
// as its first few hundred bytes and the count of the rest.
//
// It is not a log of requests, nor of reads; it never writes a
// credential (callers pass none), and it does not rotate its file.
package audit
