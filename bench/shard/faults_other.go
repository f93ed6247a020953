//go:build !linux

package main

// faultCost is measured on Linux only.
func faultCost() string {
	return "this host: the cost of a first touch of fresh memory is measured on Linux only"
}
