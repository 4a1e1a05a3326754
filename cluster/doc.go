// Package cluster learns one model on several instances: the members of a
// group (the instances of a Kafka consumer group, one generation at a
// time) each take the rows of their own partitions, and every step is the
// learner's step on the union of the members' batches (online.KPCA's
// Moments, Partial and Apply; paper Eq. 6 summed over the members' rows).
// It needs no broker: a Gatherer carries the rounds (transport.Exchange over
// NATS; MemGroup in memory).
//
// # A step
//
// Two rounds. In the first each member sends its moments (rows, Σh,
// Σh·hᵀ: k² + k + 1 numbers), the learner step and sample count it is at,
// and the offsets after its batch; every member adds the moments in rank
// order. In the second each sends its part of the gradient (features·k
// numbers, and the new block's B·k); every member adds them in rank order
// and applies the step. A member without rows sends empty parts, which
// are skipped. The first step of a model is different: every member's
// rows go to every member, and each runs Update on their union (the
// bandwidth by the median trick and the first block need the points).
//
// Following gradual change (online's learner.forget: follow): the
// member of rank 0 runs the challenger learner on its own rows and
// held-out rows; when the challenger wins, its snapshot goes with that
// step's moments and every member adopts it after the step (the same
// bytes at the same step).
//
// # Invariants
//
//   - Every member holds the same learner, bit for bit, after every step:
//     the same numbers are added in the same order everywhere.
//   - A step is applied only from every member's parts: a member that
//     misses a round does not apply the step and leaves the group
//     (ErrRejoin until it rejoins the next generation).
//   - Rejoining agrees on the most advanced state any member holds (a
//     step some members applied and others missed is still the whole
//     group's step) and sends it, with the offsets it covers, to the
//     members behind. Those offsets are where each partition resumes, so
//     nothing is learned twice and nothing is skipped.
//   - Confirmed is called only with a state every member holds: a
//     snapshot taken there is never ahead of the group.
//   - Members of one group have the same model settings (a fingerprint of
//     online.Config without the runtime settings is compared on joining).
//
// # Limits
//
// The subspace solver with random features only (online.ErrNotParallel
// otherwise); one view.
package cluster
