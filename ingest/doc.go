// Package ingest reads vectors from Kafka: a kafka-go consumer group,
// decoders for the message formats, validation, a dead-letter producer and a
// batcher that hands the learner mini-batches together with the Kafka
// offsets they cover.
//
// # Invariants
//
//   - A message is either learned or dead-lettered, never both, never
//     neither: invalid messages (empty, oversized, malformed, wrong
//     dimension, NaN/Inf) go to the dead-letter topic with their reason;
//     no payload can make the decoder panic.
//   - The offsets a batch reports are the next offsets to read after every
//     message it consumed, valid or not, per topic partition.
//   - Nothing here commits on its own: the pipeline commits offsets to the
//     group only after a snapshot covering them is persisted.
package ingest
