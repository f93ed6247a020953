// Package nemesis is fenec's fault-injection suite (make nemesis): real
// fenec-node and fenec-shard processes on loopback, every link between
// two of them through a proxy of its own that can be cut, clients at a
// steady rate through the routers and straight to the nodes, and faults
// drawn from a seeded schedule — processes paused past their lease,
// killed and started again, lease clocks jumped and slewed, partial
// partitions, handoffs and moves with a router killed halfway, power
// losses that drop every unsynced byte, copies' files damaged. Every
// operation is recorded with its call and its answer, the unknown
// outcomes too, and each run's history is checked: per tenant a
// linearizable register, list and counter (porcupine), every
// acknowledged write read back at the end, no write acknowledged by a
// node after its tenant's next primary took one, increments made exactly
// once.
//
// The scenarios run only in a test binary built with the tag nemesis,
// whose nodes are built with it too (their lease clock and fsync hooks,
// internal/nemesis); without the tag this package's tests are the
// checkers' own, which need no process. docs/testing.md says how to run
// and replay it.
package nemesis
