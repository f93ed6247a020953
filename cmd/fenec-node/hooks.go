//go:build !nemesis

package main

// testHooks wires the fault suite's hooks into a binary built with the
// tag nemesis (hooks_nemesis.go); in any other it does nothing.
func testHooks(*options) {}
