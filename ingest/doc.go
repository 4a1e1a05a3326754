// Package ingest reads vectors from Kafka: a Source (the kafka-go consumer
// group Consumer, or MemSource in tests) that fetches in the background
// into a byte-bounded queue and hands the waiting messages over in
// batches (Fetch, with the offsets each batch covers), decoders for the
// message formats (Decoder: Parse, then Check against the model), the
// file reader of `fit` (ReadFile) and the asynchronous, batched
// dead-letter queue. Cutting learning batches and the offsets a snapshot
// covers are the run loop's (package pipeline).
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
