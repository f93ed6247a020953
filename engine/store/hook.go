//go:build !nemesis

package store

import "os"

// sizeForHook and noteSynced are the fault suite's fsync hook
// (hook_nemesis.go); here they are empty and compiled away.
func sizeForHook(*os.File) int64 { return -1 }

func noteSynced(*os.File, int64) {}
