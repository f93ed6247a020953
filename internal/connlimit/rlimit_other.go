//go:build !unix

package connlimit

func descriptorLimit() uint64 { return 0 }
