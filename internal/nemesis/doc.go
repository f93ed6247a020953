// Package nemesis holds the faults a node can only suffer from inside,
// for the fault-injection suite (tests/nemesis): a lease clock the suite
// moves — jumped ahead, slewed, held still — and a record of how much of
// each tenant file the last fsync made durable, from which the suite
// makes a power loss by cutting every unsynced byte.
//
// Only binaries built with the build tag nemesis use it: their
// cmd/fenec-node wires these in when the environment names the files
// (ClockEnv, SyncedEnv), and their cmd/fenec-shard holds every move at
// the step MovePauseEnv names, for the tests that kill a router mid-move.
// A binary built without the tag imports none of it, and the engine's
// fsync calls no hook there. It is not a way to run
// a node in production: a clock someone else moves is a lease that lies.
package nemesis
