// Package publish serves learned models over NATS and HTTP.
//
//   - [Publisher] puts every new snapshot into a JetStream Object Store
//     bucket (one object per version, the newest Keep retained), points a KV
//     key (the model name) at the newest, and sends a small JSON [Notice]
//     on <prefix>.<model>.updates.
//   - [Service] is a NATS micro service "streamkpca" with the endpoints
//     <prefix>.<model>.snapshot, .project and .info.
//   - [Watch] hands a ready snapshot.Model to a callback for the current
//     version and every later one, in increasing version order.
//   - [HTTPHandler] serves /v1/models/<model>, .../snapshot and .../project.
//
// # Invariants
//
//   - A notice in the KV bucket is written only after its object is
//     stored, so a watcher never sees a version it cannot fetch.
//   - Query answers always name the version they were computed with.
package publish
