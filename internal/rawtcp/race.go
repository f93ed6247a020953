//go:build race

package rawtcp

// raceBuild: built with -race, Wrap leaves connections as they are. The
// race detector sees the kernel carry bytes from a write to the read that
// takes them only through Go's own socket calls, which tell it so; raw
// calls would hide that edge, and two goroutines talking through a
// socket would look to it like a race.
const raceBuild = true
