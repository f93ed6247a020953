//go:build !nemesis

package main

// testHooks wires the tests' hooks into a binary built with the tag
// nemesis (hooks_nemesis.go); in any other it does nothing: a router
// built for production reads no test's environment.
func testHooks(*options) {}
