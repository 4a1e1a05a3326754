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
// # Held-out scoring and load shedding
//
// A message that passes validation is, in this order: shed (not learned,
// its offset covered all the same) when load shedding's fraction says so
// (see pace); held out (learner.holdout: scored by the served model
// before its batch is learned, then learned) when HeldOut picks it; and
// learned. Both choices hash the message's partition and offset, with
// different hashes, so a restart makes the same ones at the same
// fraction; the fraction is in every snapshot (Diagnostics.LearnedFraction)
// and a restart resumes with it. Bad messages are dead-lettered whatever
// the fraction; nothing is dead-lettered for load. In cluster mode every
// member holds out and sheds by the same hashes: the group scores the
// union of its members' held-out rows and counts what they shed.
//
// # Shutdown
//
// On ctx cancellation: stop fetching → learn the partial batch → final
// snapshot, and its offsets committed (a hint for tooling: the snapshot
// is the truth) → publish (bounded by shutdown_timeout, with the rest of
// the stop) → close the consumer, the
// dead-letter queue (flushed) and the NATS connection the pipeline opened
// (drained) → return. New releases what it built when it fails, and Close
// a pipeline that will not Run.
package pipeline
