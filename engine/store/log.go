package store

// logState is the Log's state; filled in by the implementation.
type logState struct{}
