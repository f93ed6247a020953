package engine

// A document read from the table is a view of the mapped tenant file
// (doctable.go). fenec never shortens a file below what it mapped, and
// its flock keeps any other fenec off it, but another program's
// truncate(2) is not stopped by either: a read of a page past the file's
// new end then faults (SIGBUS), which would take the whole node down.
// Every path that reads a mapped document's bytes therefore runs with
// runtime/debug.SetPanicOnFault on and turns such a fault into ErrFault,
// as a graph's reads do (hnsw's guard): a statement (runner.run, so every
// read, write, index build and sweep), the encoding of a read's rows after
// its lock (RowsEncoder.Next), an image's writing (snapshot.write), a
// record applied (ApplyRecord) and an image's reading (readImage). The
// tenant stays open; each read that reaches the lost pages fails the same
// way, until it is reopened (which finds the file as it now is).
//
//	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
//	defer catchFault(&err)

// catchFault turns a fault reading mapped memory, recovered, into
// ErrFault in *err; any other panic goes on. Deferred itself (recover
// works only so) after the goroutine's SetPanicOnFault is turned on (and
// its restore deferred before it).
func catchFault(err *error) {
	if e := faultErr(recover()); e != nil {
		*err = e
	}
}

// faultErr is what a deferred function that recovered r makes of it:
// nil for no panic, ErrFault for a fault reading memory; any other panic
// goes on.
func faultErr(r any) error {
	if r == nil {
		return nil
	}
	if _, ok := r.(interface{ Addr() uintptr }); !ok {
		panic(r)
	}
	return ErrFault
}
