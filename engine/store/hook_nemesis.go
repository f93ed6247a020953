//go:build nemesis

package store

import "os"

// SyncHook, in a binary built with the tag nemesis only, is told of every
// fsync of a tenant file that succeeded, with the file's size as it began
// (internal/nemesis records it, so its fault suite can drop what was
// never synced). A build without the tag has neither the hook nor a call.
var SyncHook func(f *os.File, size int64)

// sizeForHook is f's size before an fsync, when a hook wants it (-1
// otherwise, or when it cannot be read).
func sizeForHook(f *os.File) int64 {
	if SyncHook == nil {
		return -1
	}
	st, err := f.Stat()
	if err != nil {
		return -1
	}
	return st.Size()
}

// noteSynced tells the hook of an fsync that succeeded.
func noteSynced(f *os.File, size int64) {
	if SyncHook != nil && size >= 0 {
		SyncHook(f, size)
	}
}
