package publish

import (
	"context"
	"errors"
	"io"
)

// Backend is what a model's versions are published through: an object
// store of version bytes with metadata, a key-value bucket of pointers
// (the latest notice, the pin) that readers watch, and a subject for
// notices. The Publisher, Latest and Watch keep the rules of versions
// (docs/api.md: incarnations, pruning, pins, skipping what cannot be
// fetched) on top of it, the same over every Backend: NATS JetStream
// (NATSBackend, the service's) and memory (MemBackend: tests, and the
// run loop's tests without a server). publishtest is the conformance
// suite both pass.
//
// Every method is safe for concurrent use. A reader's Backend may be
// used before the writer has created anything: reads then fail (or
// Watch waits).
type Backend interface {
	// PutObject stores the bytes read from r, to its end, under name
	// with metadata, replacing an object of that name. It holds no more
	// of them at a time than its transfer needs (NATSBackend: a chunk;
	// MemBackend keeps what it stores), and a put that stops making
	// progress ends with an error whatever ctx's deadline (NATSBackend:
	// no byte moved for 15 s).
	PutObject(ctx context.Context, name string, meta map[string]string, r io.Reader) error
	// GetObject returns a reader of the bytes stored under name
	// (ErrNotFound when there are none); the caller closes it. Its Read
	// ends in io.EOF only once every byte has come and matched the
	// store's own digest (ErrCorrupt otherwise), and in an error when ctx
	// ends or the transfer stalls as a put's does. It holds no more of
	// the object at a time than its transfer needs. A reader that can
	// say the object's size has a method Size() int64 (NATSBackend's and
	// MemBackend's do): a version's decoder then makes room for its
	// coefficients at once instead of growing it.
	GetObject(ctx context.Context, name string) (io.ReadCloser, error)
	// ListObjects lists the stored objects (names and metadata), in any
	// order.
	ListObjects(ctx context.Context) ([]ObjectInfo, error)
	// DeleteObject deletes the object name.
	DeleteObject(ctx context.Context, name string) error
	// PutKey sets key to value; GetKey reads it (ErrNotFound when unset)
	// and DeleteKey unsets it (no error when it was not set).
	PutKey(ctx context.Context, key string, value []byte) error
	GetKey(ctx context.Context, key string) ([]byte, error)
	DeleteKey(ctx context.Context, key string) error
	// GetKeyRevision reads key with its revision, a number that grows at
	// every write of the key (ErrNotFound when unset). SwapKey sets key
	// to value only if its revision is still rev (rev 0: only if the key
	// is unset or deleted) and returns the new revision; ErrConflict
	// (wrapped) when another write came first. Together they make a
	// compare-and-swap: the model's ownership lease (Lease) is built on it.
	GetKeyRevision(ctx context.Context, key string) ([]byte, uint64, error)
	SwapKey(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	// WatchKeys sends the current value of each key that has one, then a
	// KeyUpdate with Initial set, then every change of these keys, until
	// ctx ends (the channel is then closed). It waits for the bucket to
	// exist.
	WatchKeys(ctx context.Context, keys []string) (<-chan KeyUpdate, error)
	// Announce sends a notice on subject to whoever listens now, at most
	// once and not stored (NATSBackend: a core NATS message).
	Announce(subject string, data []byte) error
	// Reset forgets whatever the backend keeps between calls (after a
	// call was abandoned, or the server was replaced); the next call
	// finds it again.
	Reset()
}

// ObjectInfo is a stored object's name and metadata.
type ObjectInfo struct {
	Name     string
	Metadata map[string]string
}

// KeyUpdate is one change of a watched key: Value set (Put), or Deleted;
// Initial marks the end of the initial values.
type KeyUpdate struct {
	Key     string
	Value   []byte
	Deleted bool
	Initial bool
}

// ErrNotFound is a Backend's error for an object or key that is not
// there.
var ErrNotFound = errors.New("publish: not found")

// ErrCorrupt is a Backend's error (wrapped) for an object whose bytes
// do not match what the store recorded when they were put (their digest
// or size).
var ErrCorrupt = errors.New("publish: the object's bytes do not match its digest")

// ErrConflict is a Backend's error (wrapped) for a SwapKey whose
// expected revision is no longer the key's: someone else wrote it first.
var ErrConflict = errors.New("publish: the key was written by someone else first")

// ErrStoreFull is a Backend's error (wrapped) for an object the store has
// no room for: its bucket's byte limit or the server's storage is used
// up. The publisher then deletes old versions to make room.
var ErrStoreFull = errors.New("publish: the object store is full")

// StoreUsage is what a model's object store holds and may hold (the
// status page shows it): the bucket's bytes and byte limit, and the
// JetStream account's file storage used and allowed. A limit of -1 (or
// 0 for MaxBytes from a backend without one) is none.
type StoreUsage struct {
	Bytes        uint64 `json:"bytes"`
	MaxBytes     int64  `json:"max_bytes"`
	AccountBytes uint64 `json:"account_bytes,omitempty"`
	AccountMax   int64  `json:"account_max_bytes,omitempty"`
}

// UsageReporter is a Backend that can say how full its store is
// (NATSBackend, MemBackend).
type UsageReporter interface {
	StoreUsage(ctx context.Context) (StoreUsage, error)
}
