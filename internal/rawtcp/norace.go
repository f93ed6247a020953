//go:build !race

package rawtcp

const raceBuild = false
