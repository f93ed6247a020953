// Package profiling serves Go's runtime profiles (net/http/pprof) on a
// listener of their own, for a binary's --pprof flag: loopback only, so
// that a profile, which shows the process's memory and call stacks, never
// leaves the machine. It is not a metrics endpoint (that is /_metrics) and
// adds nothing to the router's or the node's own routes.
package profiling
