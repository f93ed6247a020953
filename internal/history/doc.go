// Package history is what fenec's fault suites record of the operations
// their clients send and how they check it: an operation (Op) with when
// it was called and when its answer came, what that answer tells of it
// (Classify: done, refused with nothing done, or unknown), and porcupine's
// models of the objects a tenant holds — a register, append-only lists, a
// counter — against which each object's operations are checked for
// linearizability (CheckObjects).
//
// tests/nemesis (make nemesis) and bench/drill (make drill) both record
// into it, so that both judge an answer's outcome one way and hold their
// histories to one model. It sends nothing and starts nothing: the
// clients, their workloads and every other check of a history are the
// suites' own.
package history
