// Package testkit is what fenec's tests share: waiting for a condition,
// reading a metric, starting a node in process. Only _test.go files
// import it; it is not part of any binary.
package testkit
