package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSBackend is the Backend over NATS JetStream: an Object Store bucket
// for the versions, a KV bucket for the pointers, core NATS for notices.
// A writer's creates the buckets on first use (so it can be made while
// NATS is unreachable); a reader's only looks them up.
type NATSBackend struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cfg    Config
	create bool
	// stall bounds a transfer's silence (defaultStall).
	stall time.Duration

	mu  sync.Mutex
	obs jetstream.ObjectStore
	kv  jetstream.KeyValue
}

// NewNATSBackend returns cfg's buckets on nc (cfg with defaults);
// create says whether to create them.
func NewNATSBackend(nc *nats.Conn, cfg Config, create bool) (*NATSBackend, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("publish: jetstream: %w", err)
	}
	return &NATSBackend{nc: nc, js: js, cfg: cfg, create: create, stall: defaultStall}, nil
}

// defaultStall bounds how long an object's put or get may go without a
// byte crossing the connection (a partition, a server gone) before it is
// abandoned.
const defaultStall = 15 * time.Second

// collectEvery: a get of a large object collects the garbage of its
// chunks (each a fresh buffer, copied into the object's room) every this
// many bytes: left to the collector's pace, they pile up to the size of
// the object itself (its room is live from the start), doubling the
// heap a reader of a large model needs.
const collectEvery = 32 << 20

// errStalled ends a transfer that moved nothing for the stall bound.
var errStalled = errors.New("the transfer stalled: nothing moved")

// transfer returns the context of an object's put or get: ctx's, without
// nats.go's default timeout, and ended when the connection has moved no
// byte, either way, for b.stall. nats.go bounds a whole put or get whose
// context has no deadline by its default timeout (5 s), so a large model
// on a slow link could never be published or fetched: a transfer is
// bounded by its progress instead, and by ctx.
func (b *NATSBackend) transfer(ctx context.Context) (context.Context, context.CancelFunc) {
	tctx, cancel := context.WithCancelCause(ctx)
	end := func() { cancel(nil) }
	if _, ok := ctx.Deadline(); !ok {
		var cancelD context.CancelFunc
		tctx, cancelD = context.WithDeadline(tctx, time.Now().Add(365*24*time.Hour)) // "none": the stall bounds it
		end = func() { cancelD(); cancel(nil) }
	}
	moved := func() uint64 { st := b.nc.Stats(); return st.InBytes + st.OutBytes }
	go func() {
		last, since := moved(), time.Now()
		tick := time.NewTicker(max(b.stall/8, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case now := <-tick.C:
				if m := moved(); m != last {
					last, since = m, now
				} else if now.Sub(since) >= b.stall {
					cancel(fmt.Errorf("%w for %v", errStalled, b.stall))
					return
				}
			}
		}
	}()
	return tctx, end
}

// stalled names a transfer's stall in its error (nats.go reports the
// cancelled context as a timeout).
func stalled(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// handles returns the bucket handles, looking them up (or creating them)
// when there are none. The mutex guards only the handles, never a
// network call, so that a call the client fails to return from cannot
// block the next one.
func (b *NATSBackend) handles(ctx context.Context) (jetstream.ObjectStore, jetstream.KeyValue, error) {
	b.mu.Lock()
	obs, kv := b.obs, b.kv
	b.mu.Unlock()
	if obs != nil {
		return obs, kv, nil
	}
	var err error
	if b.create {
		obs, err = b.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: b.cfg.ObjectBucket, Description: "streamkpca snapshot versions", Storage: jetstream.FileStorage, Replicas: b.cfg.Replicas})
	} else {
		obs, err = b.js.ObjectStore(ctx, b.cfg.ObjectBucket)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("publish: object store %q: %w", b.cfg.ObjectBucket, err)
	}
	if b.create {
		kv, err = b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.cfg.KVBucket, Description: "streamkpca latest snapshot per model", History: 5, Storage: jetstream.FileStorage, Replicas: b.cfg.Replicas})
	} else {
		kv, err = b.js.KeyValue(ctx, b.cfg.KVBucket)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("publish: key-value bucket %q: %w", b.cfg.KVBucket, err)
	}
	b.mu.Lock()
	b.obs, b.kv = obs, kv
	b.mu.Unlock()
	return obs, kv, nil
}

func (b *NATSBackend) PutObject(ctx context.Context, name string, meta map[string]string, data []byte) error {
	obs, _, err := b.handles(ctx)
	if err != nil {
		return err
	}
	tctx, end := b.transfer(ctx)
	defer end()
	if _, err := obs.Put(tctx, jetstream.ObjectMeta{Name: name, Metadata: meta}, bytes.NewReader(data)); err != nil {
		err = stalled(tctx, err)
		if storeFull(err) {
			return fmt.Errorf("publish: put %s: %w: %w", name, ErrStoreFull, err)
		}
		return fmt.Errorf("publish: put %s: %w", name, err)
	}
	return nil
}

// storeFull reports whether a JetStream error says the store has no room:
// insufficient resources (the server's storage, 10023) or a store failure
// for a bucket's byte limit (10077, "maximum bytes exceeded").
func storeFull(err error) bool {
	if err == nil {
		return false
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case 10023:
			return true
		case 10077:
			return strings.Contains(api.Description, "maximum bytes") || strings.Contains(api.Description, "resources")
		}
	}
	s := err.Error()
	return strings.Contains(s, "insufficient resources") || strings.Contains(s, "maximum bytes exceeded")
}

// GetObject reads the object's chunks with an ordered consumer of its
// own rather than the object store's reader: that reader bounds a get
// whose context has no deadline by nats.go's default timeout (5 s),
// whole, and blocks a read until the context's deadline, so neither a
// large model on a slow link nor a stalled transfer could be handled.
// Here a get ends when ctx does or when no chunk has come for b.stall;
// the bytes are read into room for the whole object (its size is in its
// info) and checked against its digest.
func (b *NATSBackend) GetObject(ctx context.Context, name string) ([]byte, error) {
	obs, _, err := b.handles(ctx)
	if err != nil {
		return nil, err
	}
	info, err := obs.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("publish: get %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("publish: get %s: %w", name, err)
	}
	want, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil {
		return nil, fmt.Errorf("publish: get %s: its digest %q: %w", name, info.Digest, err)
	}
	data := make([]byte, 0, info.Size)
	sum := sha256.New()
	if info.Size > 0 {
		cons, err := b.js.OrderedConsumer(ctx, "OBJ_"+b.cfg.ObjectBucket, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{"$O." + b.cfg.ObjectBucket + ".C." + info.NUID},
		})
		if err != nil {
			return nil, fmt.Errorf("publish: get %s: %w", name, err)
		}
		it, err := cons.Messages()
		if err != nil {
			return nil, fmt.Errorf("publish: get %s: %w", name, err)
		}
		var why error
		var whyMu sync.Mutex
		stop := func(err error) {
			whyMu.Lock()
			if why == nil {
				why = err
			}
			whyMu.Unlock()
			it.Stop()
		}
		stall := time.AfterFunc(b.stall, func() { stop(fmt.Errorf("%w for %v", errStalled, b.stall)) })
		defer stall.Stop()
		defer context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })()
		for uint64(len(data)) < info.Size {
			msg, err := it.Next()
			if err != nil {
				it.Stop()
				whyMu.Lock()
				if why != nil {
					err = why
				}
				whyMu.Unlock()
				return nil, fmt.Errorf("publish: get %s after %d of %d bytes: %w", name, len(data), info.Size, err)
			}
			stall.Reset(b.stall)
			if uint64(len(data)+len(msg.Data())) > info.Size {
				it.Stop()
				return nil, fmt.Errorf("publish: get %s: chunks past its size %d", name, info.Size)
			}
			data = append(data, msg.Data()...)
			sum.Write(msg.Data())
			if collectEvery > 0 && info.Size >= 2*collectEvery && len(data)/collectEvery != (len(data)-len(msg.Data()))/collectEvery {
				runtime.GC()
			}
		}
		it.Stop()
	}
	if !bytes.Equal(sum.Sum(nil), want) {
		return nil, fmt.Errorf("publish: get %s: %w", name, jetstream.ErrDigestMismatch)
	}
	return data, nil
}

func (b *NATSBackend) ListObjects(ctx context.Context) ([]ObjectInfo, error) {
	obs, _, err := b.handles(ctx)
	if err != nil {
		return nil, err
	}
	lst, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("publish: list %s: %w", b.cfg.ObjectBucket, err)
	}
	out := make([]ObjectInfo, len(lst))
	for i, o := range lst {
		out[i] = ObjectInfo{Name: o.Name, Metadata: o.Metadata}
	}
	return out, nil
}

func (b *NATSBackend) DeleteObject(ctx context.Context, name string) error {
	obs, _, err := b.handles(ctx)
	if err != nil {
		return err
	}
	bucket := b.cfg.ObjectBucket
	st, serr := b.js.Stream(ctx, "OBJ_"+bucket)
	err = obs.Delete(ctx, name)
	if err != nil && storeFull(err) && serr == nil {
		// A delete writes a marker first, which a full store refuses:
		// free the object's chunks through its stream, then delete.
		if info, ierr := obs.GetInfo(ctx, name); ierr == nil && info.NUID != "" {
			_ = st.Purge(ctx, jetstream.WithPurgeSubject(fmt.Sprintf("$O.%s.C.%s", bucket, info.NUID)))
		}
		err = obs.Delete(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("publish: delete %s: %w", name, err)
	}
	if serr == nil {
		// The delete left a marker in the name's meta subject: every
		// pruned version would leave one, for good, filling the store
		// over time. Purge it; the name is then simply absent.
		_ = st.Purge(ctx, jetstream.WithPurgeSubject(fmt.Sprintf("$O.%s.M.%s", bucket, base64.URLEncoding.EncodeToString([]byte(name)))))
	}
	return nil
}

func (b *NATSBackend) PutKey(ctx context.Context, key string, value []byte) error {
	_, kv, err := b.handles(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, key, value); err != nil {
		if storeFull(err) {
			return fmt.Errorf("publish: put key %s: %w: %w", key, ErrStoreFull, err)
		}
		return fmt.Errorf("publish: put key %s: %w", key, err)
	}
	return nil
}

func (b *NATSBackend) GetKey(ctx context.Context, key string) ([]byte, error) {
	_, kv, err := b.handles(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("publish: key %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("publish: get key %s: %w", key, err)
	}
	return e.Value(), nil
}

func (b *NATSBackend) DeleteKey(ctx context.Context, key string) error {
	_, kv, err := b.handles(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("publish: delete key %s: %w", key, err)
	}
	return nil
}

func (b *NATSBackend) GetKeyRevision(ctx context.Context, key string) ([]byte, uint64, error) {
	_, kv, err := b.handles(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("publish: key %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("publish: get key %s: %w", key, err)
	}
	return e.Value(), e.Revision(), nil
}

func (b *NATSBackend) SwapKey(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	_, kv, err := b.handles(ctx)
	if err != nil {
		return 0, err
	}
	var n uint64
	if rev == 0 {
		n, err = kv.Create(ctx, key, value)
	} else {
		n, err = kv.Update(ctx, key, value, rev)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return 0, fmt.Errorf("publish: swap key %s at revision %d: %w", key, rev, ErrConflict)
	case storeFull(err):
		return 0, fmt.Errorf("publish: swap key %s: %w: %w", key, ErrStoreFull, err)
	case err != nil:
		return 0, fmt.Errorf("publish: swap key %s: %w", key, err)
	}
	return n, nil
}

// StoreUsage reads the object bucket's stream state and limit and the
// account's JetStream storage.
func (b *NATSBackend) StoreUsage(ctx context.Context) (StoreUsage, error) {
	obs, _, err := b.handles(ctx)
	if err != nil {
		return StoreUsage{}, err
	}
	st, err := obs.Status(ctx)
	if err != nil {
		return StoreUsage{}, fmt.Errorf("publish: object store status: %w", err)
	}
	u := StoreUsage{Bytes: st.Size(), MaxBytes: -1}
	if s, ok := st.(*jetstream.ObjectBucketStatus); ok && s.StreamInfo() != nil {
		u.MaxBytes = s.StreamInfo().Config.MaxBytes
	}
	if ai, err := b.js.AccountInfo(ctx); err == nil {
		u.AccountBytes, u.AccountMax = ai.Store, ai.Limits.MaxStore
	}
	return u, nil
}

// WatchKeys waits for the buckets (every 250 ms), then watches keys.
func (b *NATSBackend) WatchKeys(ctx context.Context, keys []string) (<-chan KeyUpdate, error) {
	var kv jetstream.KeyValue
	for {
		var err error
		if _, kv, err = b.handles(ctx); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	w, err := kv.WatchFiltered(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("publish: watch %v: %w", keys, err)
	}
	out := make(chan KeyUpdate)
	go watchSupervised(ctx, kv, keys, w, out, watchCheck)
	return out, nil
}

// watchCheck is how often a watch compares the keys' revisions with what
// it delivered.
const watchCheck = 5 * time.Second

// watchSupervised forwards w's updates to out until ctx ends, and starts
// the watch again when it has fallen silent behind the keys: every
// interval it reads the keys, and a key whose revision is past what
// the watch delivered at two checks in a row means the watch's consumer
// was lost and not recreated (a server of the cluster gone with it, a
// leader elected meanwhile: nats.go's ordered consumer does not always
// recover). The new watch's initial values go out as updates (the reader
// dedups by version), and a key it no longer holds as deleted; the
// initial marker is sent once, for the first watch.
func watchSupervised(ctx context.Context, kv jetstream.KeyValue, keys []string, w jetstream.KeyWatcher, out chan<- KeyUpdate, interval time.Duration) {
	defer close(out)
	defer func() { w.Stop() }()
	send := func(u KeyUpdate) bool {
		select {
		case out <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	seen := map[string]uint64{}   // the revision delivered, per key
	behind := map[string]uint64{} // a revision past it found at the last check
	var present map[string]bool   // keys a restarted watch's initial values hold (nil: not restarting)
	check := time.NewTicker(interval)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			if !watchBehind(ctx, kv, keys, seen, behind, interval) {
				continue
			}
			nw, err := kv.WatchFiltered(ctx, keys)
			if err != nil {
				continue // the next check tries again
			}
			w.Stop()
			w, present = nw, map[string]bool{}
			clear(behind)
			clear(seen) // the new watch's values set them again
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			var u KeyUpdate
			switch {
			case e == nil && present != nil: // a restarted watch's initial values are in
				for _, k := range keys {
					if !present[k] && !send(KeyUpdate{Key: k, Deleted: true}) {
						return
					}
				}
				present = nil
				continue
			case e == nil:
				u.Initial = true
			case e.Operation() == jetstream.KeyValuePut:
				u.Key, u.Value = e.Key(), e.Value()
				seen[e.Key()] = e.Revision()
				if present != nil {
					present[e.Key()] = true
				}
			default: // deleted or purged
				u.Key, u.Deleted = e.Key(), true
				seen[e.Key()] = e.Revision()
			}
			if !send(u) {
				return
			}
		}
	}
}

// watchBehind reads the keys and reports whether one has been at a
// revision past the delivered one at this check and the one before
// (behind holds what the last check found).
func watchBehind(ctx context.Context, kv jetstream.KeyValue, keys []string, seen, behind map[string]uint64, wait time.Duration) bool {
	stale := false
	for _, k := range keys {
		gctx, cancel := context.WithTimeout(ctx, wait)
		e, err := kv.Get(gctx, k)
		cancel()
		if err == nil && e.Revision() < seen[k] {
			return true // revisions went back: the bucket was deleted and made again (a reset)
		}
		if err != nil || e.Revision() <= seen[k] {
			delete(behind, k)
			continue
		}
		if r, ok := behind[k]; ok && r > seen[k] {
			stale = true
		}
		behind[k] = e.Revision()
	}
	return stale
}

func (b *NATSBackend) Announce(subject string, data []byte) error {
	if err := b.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("publish: notice: %w", err)
	}
	return nil
}

func (b *NATSBackend) Reset() {
	b.mu.Lock()
	b.obs, b.kv = nil, nil
	b.mu.Unlock()
}
