package publish

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
)

// MemBackend is a Backend in memory: one store that every handle shares
// (tests, and the run loop's tests without a NATS server). Announce
// hands notices to Notices' channels. The zero value is not usable: use
// NewMemBackend.
type MemBackend struct {
	mu       sync.Mutex
	objects  map[string]memObject
	keys     map[string][]byte
	watchers map[*memWatch]struct{}
	notices  []chan []byte
	revs     map[string]uint64 // each key's revision: seq at its last write
	seq      uint64
	// Fail, when set, is called first by every method with its name; a
	// non-nil error is returned as the method's (an unreachable server,
	// a full disk).
	Fail func(method string) error
	// MaxBytes, when positive, bounds the objects' bytes: a put past it
	// fails with ErrStoreFull (a JetStream bucket's byte limit).
	MaxBytes int
	// KeysShareRoom makes key writes count against MaxBytes too: with
	// the objects at the bound, a key write fails with ErrStoreFull (a
	// JetStream server whose storage both buckets share).
	KeysShareRoom bool
}

// keyRoom reports ErrStoreFull for a key write of n bytes under
// KeysShareRoom; the caller holds b.mu.
func (b *MemBackend) keyRoom(key string, n int) error {
	if !b.KeysShareRoom || b.MaxBytes <= 0 {
		return nil
	}
	used := n
	for _, o := range b.objects {
		used += len(o.data)
	}
	if used > b.MaxBytes {
		return fmt.Errorf("publish: write key %s: %w (%d bytes of %d)", key, ErrStoreFull, used, b.MaxBytes)
	}
	return nil
}

type memObject struct {
	meta map[string]string
	data []byte
}

type memWatch struct {
	keys []string
	ch   chan KeyUpdate
	ctx  context.Context
}

// NewMemBackend returns an empty store.
func NewMemBackend() *MemBackend {
	return &MemBackend{objects: map[string]memObject{}, keys: map[string][]byte{}, revs: map[string]uint64{}, watchers: map[*memWatch]struct{}{}}
}

func (b *MemBackend) fail(method string) error {
	b.mu.Lock()
	f := b.Fail
	b.mu.Unlock()
	if f == nil {
		return nil
	}
	if err := f(method); err != nil {
		return fmt.Errorf("publish: memory %s: %w", method, err)
	}
	return nil
}

// SetFail sets Fail safely while the backend is in use.
func (b *MemBackend) SetFail(f func(method string) error) {
	b.mu.Lock()
	b.Fail = f
	b.mu.Unlock()
}

func (b *MemBackend) PutObject(_ context.Context, name string, meta map[string]string, r io.Reader) error {
	if err := b.fail("PutObject"); err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("publish: put %s: %w", name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.MaxBytes > 0 {
		used := len(data)
		for n, o := range b.objects {
			if n != name {
				used += len(o.data)
			}
		}
		if used > b.MaxBytes {
			return fmt.Errorf("publish: put %s: %w (%d bytes of %d)", name, ErrStoreFull, used, b.MaxBytes)
		}
	}
	b.objects[name] = memObject{meta: maps.Clone(meta), data: data}
	return nil
}

// GetObject reads the stored bytes themselves: an object is never
// changed once stored (a put of the same name replaces it).
func (b *MemBackend) GetObject(_ context.Context, name string) (io.ReadCloser, error) {
	if err := b.fail("GetObject"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[name]
	if !ok {
		return nil, fmt.Errorf("publish: get %s: %w", name, ErrNotFound)
	}
	return memReader{bytes.NewReader(o.data)}, nil
}

// memReader is MemBackend's object reader; its Size is the object's.
type memReader struct{ *bytes.Reader }

func (memReader) Close() error { return nil }

func (b *MemBackend) ListObjects(context.Context) ([]ObjectInfo, error) {
	if err := b.fail("ListObjects"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ObjectInfo, 0, len(b.objects))
	for name, o := range b.objects {
		out = append(out, ObjectInfo{Name: name, Metadata: maps.Clone(o.meta)})
	}
	return out, nil
}

func (b *MemBackend) DeleteObject(_ context.Context, name string) error {
	if err := b.fail("DeleteObject"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objects[name]; !ok {
		return fmt.Errorf("publish: delete %s: %w", name, ErrNotFound)
	}
	delete(b.objects, name)
	return nil
}

func (b *MemBackend) PutKey(_ context.Context, key string, value []byte) error {
	if err := b.fail("PutKey"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.keyRoom(key, len(value)); err != nil {
		return err
	}
	b.keys[key] = slices.Clone(value)
	b.seq++
	b.revs[key] = b.seq
	b.notify(KeyUpdate{Key: key, Value: slices.Clone(value)})
	return nil
}

// StoreUsage sums the objects' bytes; MaxBytes is the limit (0: none).
func (b *MemBackend) StoreUsage(context.Context) (StoreUsage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := StoreUsage{MaxBytes: int64(b.MaxBytes)}
	if u.MaxBytes == 0 {
		u.MaxBytes = -1
	}
	for _, o := range b.objects {
		u.Bytes += uint64(len(o.data))
	}
	return u, nil
}

func (b *MemBackend) GetKeyRevision(_ context.Context, key string) ([]byte, uint64, error) {
	if err := b.fail("GetKeyRevision"); err != nil {
		return nil, 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.keys[key]
	if !ok {
		return nil, 0, fmt.Errorf("publish: key %s: %w", key, ErrNotFound)
	}
	return slices.Clone(v), b.revs[key], nil
}

func (b *MemBackend) SwapKey(_ context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if err := b.fail("SwapKey"); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.keyRoom(key, len(value)); err != nil {
		return 0, err
	}
	_, set := b.keys[key]
	if (rev == 0 && set) || (rev != 0 && (!set || b.revs[key] != rev)) {
		return 0, fmt.Errorf("publish: swap key %s at revision %d: %w", key, rev, ErrConflict)
	}
	b.keys[key] = slices.Clone(value)
	b.seq++
	b.revs[key] = b.seq
	b.notify(KeyUpdate{Key: key, Value: slices.Clone(value)})
	return b.seq, nil
}

func (b *MemBackend) GetKey(_ context.Context, key string) ([]byte, error) {
	if err := b.fail("GetKey"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.keys[key]
	if !ok {
		return nil, fmt.Errorf("publish: key %s: %w", key, ErrNotFound)
	}
	return slices.Clone(v), nil
}

func (b *MemBackend) DeleteKey(_ context.Context, key string) error {
	if err := b.fail("DeleteKey"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.keys[key]; ok {
		delete(b.keys, key)
		b.notify(KeyUpdate{Key: key, Deleted: true})
	}
	return nil
}

// notify queues u for every watcher of its key; b.mu is held. Each
// watcher's queue holds 1,024 updates in order (drained by its own
// goroutine): a writer waits only for a watcher that far behind.
func (b *MemBackend) notify(u KeyUpdate) {
	for w := range b.watchers {
		if slices.Contains(w.keys, u.Key) {
			select {
			case w.ch <- u:
			case <-w.ctx.Done():
			}
		}
	}
}

func (b *MemBackend) WatchKeys(ctx context.Context, keys []string) (<-chan KeyUpdate, error) {
	if err := b.fail("WatchKeys"); err != nil {
		return nil, err
	}
	in := make(chan KeyUpdate, 1024)
	w := &memWatch{keys: slices.Clone(keys), ch: in, ctx: ctx}
	b.mu.Lock()
	for _, k := range keys {
		if v, ok := b.keys[k]; ok {
			in <- KeyUpdate{Key: k, Value: slices.Clone(v)}
		}
	}
	in <- KeyUpdate{Initial: true}
	b.watchers[w] = struct{}{}
	b.mu.Unlock()
	out := make(chan KeyUpdate)
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.watchers, w)
			b.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-in:
				select {
				case out <- u:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// Notices returns a channel that receives every notice announced from now
// on (buffered: 1,024; past that, notices are dropped, as core NATS drops
// them for a slow subscriber).
func (b *MemBackend) Notices() <-chan []byte {
	ch := make(chan []byte, 1024)
	b.mu.Lock()
	b.notices = append(b.notices, ch)
	b.mu.Unlock()
	return ch
}

func (b *MemBackend) Announce(_ string, data []byte) error {
	if err := b.fail("Announce"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range b.notices {
		select {
		case ch <- slices.Clone(data):
		default:
		}
	}
	return nil
}

func (b *MemBackend) Reset() {}
