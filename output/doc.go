// Package output is the service's third edge: every good input message
// scored, one record per source offset, on a Kafka topic (output.topic).
//
// # Records
//
// A record's value is JSON, its fields always in this order:
//
//	{"source":{"topic":T,"partition":P,"offset":O},
//	 "model":{"incarnation":I,"version":V},
//	 "projection":[k numbers],"residual":R,"novelty":Q,"novel":B}
//
// where
//
//   - projection: what POST /v1/models/{m}/versions/{V}/project answers for
//     the message's x (snapshot.Model.Project, the same bits);
//   - residual: snapshot.Model.Score's residual, the squared distance in the
//     model's feature space between the message's features and their
//     projection onto the k components (kernel PCA's reconstruction error,
//     in the kernel's units); null for a centred model;
//   - novelty: snapshot.Model.Novelty of the residual, its place among the
//     version's reference residuals; null when the version has none;
//   - novel: novelty ≥ output.novelty_quantile.
//
// "model" is null, and the numbers with it, for the messages that arrive
// before the first version exists. The key is the input's key, or
// "topic/partition/offset" when it has none; headers carry the model's
// version and incarnation and the source's topic, partition and offset.
//
// # Invariants
//
//   - Test, then train: a message is scored by the version served when it
//     was handled, which never learned it. Its record is a function of the
//     message and that version alone (Encode): the score endpoints give the
//     same numbers for the same version.
//   - Nothing lost: the run loop writes a batch's records right after its
//     step (scored by the version served, which the step does not change)
//     and before the next batch, and no snapshot covers a message whose
//     record is not stored; a restart reads the rest again and writes their records.
//     Records written before a crash and not covered by the snapshot the
//     service resumes from are written again (at least once); a reader
//     deduplicates by source offset. Written again, a record has the same
//     bytes: the restarted service scores those messages with the version
//     it resumes from, the one that served them before the crash, until it
//     cuts its next version (snapshot.every_batches batches, or
//     snapshot.every) — after the crash point, unless the restarted
//     service's batches are emptier than the first run's were (a backlog
//     fills them) or its clock runs ahead.
//   - Order: a source partition's records go to one output partition
//     (source partition mod the topic's partitions), in offset order.
//
// # Producers
//
// A Producer stores records; Kafka (kafka-go, acks from all in-sync
// replicas) and Memory (tests) pass the conformance suite in
// output/outputtest.
package output
