// Package publish distributes learned models: every version a service
// learns reaches every reader, in order, over a [Backend] (NATS
// JetStream: [NATSBackend]; memory: [MemBackend]).
//
//   - [Publisher] puts every new snapshot into the backend's object
//     store (one object per version, the newest Keep retained), points a
//     key (the model name) at the newest, and sends a small JSON [Notice]
//     on <prefix>.<model>.updates. One service publishes a model name at a
//     time ([Lease]).
//   - [Latest] fetches the newest version; [Watch] hands a ready
//     snapshot.Model to a callback for the current version and every
//     later one, in increasing version order, following pins.
//   - [StoreVersions] lists and loads the versions of a local snapshot
//     store in their published form ([PublishedBytes]).
//
// The query front ends (NATS micro service, HTTP) are package serve; the
// cluster's transport is package transport.
//
// # Invariants
//
//   - A notice in the key-value bucket is written only after its object
//     is stored, so a watcher never sees a version it cannot fetch.
package publish
