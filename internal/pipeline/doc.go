// Package pipeline wires ingest → online → snapshot → publish and owns the
// run loop, the snapshot cadence and the shutdown order.
//
// # Exactly-once learning
//
// The newest valid snapshot is the truth. On start it is restored into the
// learner and every partition is read from the next offset recorded in it
// (a partition it has never seen starts at kafka.start). Every message
// consumed advances the partition's "consumed" offset; a message below it
// (re-delivered after a rebalance) is dropped. A snapshot records the
// offsets of everything learned (plus trailing dead-lettered messages), so
// after a crash the gap between the last snapshot and the crash is re-read
// and learned exactly once. Group commits follow a persisted snapshot and
// are only a hint for tooling. Dead-lettering is at-least-once: a refused
// message consumed after the last snapshot is dead-lettered again after a
// crash.
//
// # Shutdown
//
// On ctx cancellation: stop fetching → learn the partial batch → final
// snapshot → publish (bounded wait) → commit → return. The caller drains
// NATS afterwards.
package pipeline
