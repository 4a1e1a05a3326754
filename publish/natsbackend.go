package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
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
	// window bounds the bytes of a put's chunks awaiting acknowledgement
	// (defaultWindow).
	window int

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
	return &NATSBackend{nc: nc, js: js, cfg: cfg, create: create, stall: defaultStall, window: defaultWindow}, nil
}

// defaultStall bounds how long an object's put or get may go without a
// byte crossing the connection (a partition, a server gone) before it is
// abandoned.
const defaultStall = 15 * time.Second

// collectEvery: a get of a large object collects the garbage of its
// chunks (each a fresh buffer, handed on and dropped) every this many
// bytes: a reader that builds the object up in memory (a snapshot's
// decoder) would otherwise see them pile up, at the collector's pace,
// to the size of what it has built, doubling its heap.
const collectEvery = 32 << 20

// errStalled ends a transfer that moved nothing for the stall bound.
var errStalled = errors.New("the transfer stalled: nothing moved")

// transfer returns the context of an object's put: ctx's, without
// nats.go's default timeout, and ended when the transfer's own progress
// (progress: its acknowledged bytes) has not moved for b.stall. nats.go
// bounds a whole put whose context has no deadline by its default
// timeout (5 s), so a large model on a slow link could never be
// published: a transfer is bounded by its progress instead, and by ctx.
// Its own progress, not the connection's bytes: the connection also
// carries the cluster's exchange and the queries, and on a busy one a
// stalled put was never found (a 500 MB put waited about 32 minutes).
func (b *NATSBackend) transfer(ctx context.Context, progress func() uint64) (context.Context, context.CancelFunc) {
	tctx, cancel := context.WithCancelCause(ctx)
	end := func() { cancel(nil) }
	if _, ok := ctx.Deadline(); !ok {
		var cancelD context.CancelFunc
		tctx, cancelD = context.WithDeadline(tctx, time.Now().Add(365*24*time.Hour)) // "none": the stall bounds it
		end = func() { cancelD(); cancel(nil) }
	}
	moved := progress
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

// PutObject writes the object's chunks itself rather than through the
// object store's Put: that Put publishes every chunk without waiting
// for the server's acknowledgements (up to 4,000 chunks, 500 MiB, in
// flight), more than a stream takes in at once (128 MiB by default):
// a large model met "too many requests" whenever the server fell behind.
// Here at most b.window bytes of chunks await their acknowledgement;
// the object's info (size, chunk count, digest) is written when every
// chunk is stored, and the chunks of the object it replaces are purged.
// The layout is the object store's own: its List, GetInfo and Delete
// read it.
func (b *NATSBackend) PutObject(ctx context.Context, name string, meta map[string]string, r io.Reader) error {
	if _, _, err := b.handles(ctx); err != nil {
		return err
	}
	var acked atomic.Uint64
	tctx, end := b.transfer(ctx, acked.Load)
	defer end()
	if err := b.putChunks(tctx, name, meta, r, &acked); err != nil {
		err = stalled(tctx, err)
		if storeFull(err) {
			return fmt.Errorf("publish: put %s: %w: %w", name, ErrStoreFull, err)
		}
		return fmt.Errorf("publish: put %s: %w", name, err)
	}
	return nil
}

// chunkSize is the size of an object's chunks (the object store's
// default).
const chunkSize = 128 << 10

// defaultWindow bounds the bytes of a put's chunks awaiting the server's
// acknowledgement.
const defaultWindow = 8 << 20

func (b *NATSBackend) putChunks(ctx context.Context, name string, meta map[string]string, r io.Reader, acked *atomic.Uint64) error {
	obs, _, err := b.handles(ctx)
	if err != nil {
		return err
	}
	old, err := obs.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	bucket := b.cfg.ObjectBucket
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Metadata: meta, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}},
		Bucket:     bucket, NUID: nuid.Next(),
	}
	err = b.sendChunks(ctx, r, &info, acked)
	if err == nil {
		var data []byte
		if data, err = json.Marshal(info); err == nil {
			m := nats.NewMsg("$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name)))
			m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
			m.Data = data
			_, err = b.js.PublishMsg(ctx, m)
		}
	}
	if err != nil {
		b.purge(ctx, "$O."+bucket+".C."+info.NUID)
		return err
	}
	if old != nil && !old.Deleted && old.NUID != "" {
		b.purge(ctx, "$O."+bucket+".C."+old.NUID)
	}
	return nil
}

// sendChunks publishes r's bytes, to its end, as the chunks of the
// object info describes (its NUID), with at most b.window bytes awaiting
// the server's acknowledgement, and records their count, size and
// digest in info once every one is acknowledged.
func (b *NATSBackend) sendChunks(ctx context.Context, r io.Reader, info *jetstream.ObjectInfo, acked *atomic.Uint64) error {
	subject := "$O." + info.Bucket + ".C." + info.NUID
	// A publisher of its own, cleaned up at the end: a put abandoned
	// before its acknowledgements came (a stall, a partition) would
	// otherwise leave them pending on a shared one, a window per failed
	// put, until its 4,000 pending slots were full and every put stalled.
	pjs, err := jetstream.New(b.nc)
	if err != nil {
		return err
	}
	defer pjs.CleanupPublisher()
	sum := sha256.New()
	window := max(b.window/chunkSize, 1)
	bufs := make([][]byte, 0, window) // chunk k is sent from bufs[k%window]
	acks := make([]jetstream.PubAckFuture, 0, window)
	for {
		if len(acks) == window { // chunk k-window's buffer is free once it is acknowledged
			if err := awaitAck(ctx, acks[0]); err != nil {
				return err
			}
			acked.Add(1)
			acks = acks[1:]
		}
		k := int(info.Chunks) % window
		if k == len(bufs) {
			bufs = append(bufs, make([]byte, chunkSize))
		}
		n, rerr := io.ReadFull(r, bufs[k])
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return rerr
		}
		if n > 0 {
			sum.Write(bufs[k][:n])
			ack, err := pjs.PublishMsgAsync(&nats.Msg{Subject: subject, Data: bufs[k][:n]})
			if err != nil {
				return err
			}
			acks = append(acks, ack)
			info.Chunks++
			info.Size += uint64(n)
		}
		if rerr != nil {
			break
		}
	}
	for _, a := range acks {
		if err := awaitAck(ctx, a); err != nil {
			return err
		}
		acked.Add(1)
	}
	info.Digest = jetstream.GetObjectDigestValue(sum)
	return nil
}

// purge deletes the messages of subject from the object bucket's
// stream, best effort, within ctx and 5 s. A put that ended with its
// context (a stall, a stop) leaves its chunks, as the object store's own
// put does: the server is out of reach, or the caller gone.
func (b *NATSBackend) purge(ctx context.Context, subject string) {
	if ctx.Err() != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if st, err := b.js.Stream(pctx, "OBJ_"+b.cfg.ObjectBucket); err == nil {
		_ = st.Purge(pctx, jetstream.WithPurgeSubject(subject))
	}
}

// awaitAck waits for a published chunk's acknowledgement.
func awaitAck(ctx context.Context, a jetstream.PubAckFuture) error {
	select {
	case <-a.Ok():
		return nil
	case err := <-a.Err():
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
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
// Here a get ends when ctx does or when a wait for the next chunk
// lasts b.stall (the time the caller takes between reads is its own);
// the chunks are handed on as they come, and their size and digest
// checked against the object's info at the end.
func (b *NATSBackend) GetObject(ctx context.Context, name string) (io.ReadCloser, error) {
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
	r := &objectReader{name: name, size: info.Size, want: want, sum: sha256.New(), stall: b.stall}
	if info.Size == 0 {
		return r, nil
	}
	cons, err := b.js.OrderedConsumer(ctx, "OBJ_"+b.cfg.ObjectBucket, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"$O." + b.cfg.ObjectBucket + ".C." + info.NUID},
	})
	if err != nil {
		return nil, fmt.Errorf("publish: get %s: %w", name, err)
	}
	if r.it, err = cons.Messages(); err != nil {
		return nil, fmt.Errorf("publish: get %s: %w", name, err)
	}
	r.timer = time.AfterFunc(time.Hour, func() { r.stop(fmt.Errorf("%w for %v", errStalled, b.stall)) })
	r.timer.Stop()
	r.unwatch = context.AfterFunc(ctx, func() { r.stop(context.Cause(ctx)) })
	return r, nil
}

// objectReader is GetObject's reader: an object's chunks as its ordered
// consumer delivers them.
type objectReader struct {
	name  string
	size  uint64
	want  []byte // the digest the store recorded
	sum   hash.Hash
	stall time.Duration

	it      jetstream.MessagesContext // nil for an empty object
	timer   *time.Timer               // ends a wait for a chunk past stall
	unwatch func() bool               // ends the watch of the get's ctx
	got     uint64
	cur     []byte // what is left of the chunk last received
	err     error  // what every later Read returns
	done    sync.Once

	whyMu sync.Mutex
	why   error // why the transfer was stopped: a stall, the ctx's end
}

// stop ends the transfer for why (the first reason is kept).
func (r *objectReader) stop(why error) {
	r.whyMu.Lock()
	if r.why == nil {
		r.why = why
	}
	r.whyMu.Unlock()
	r.it.Stop()
}

func (r *objectReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for len(r.cur) == 0 {
		if r.got == r.size {
			r.release()
			r.err = io.EOF
			if !bytes.Equal(r.sum.Sum(nil), r.want) {
				r.err = fmt.Errorf("publish: get %s: %w: %w", r.name, ErrCorrupt, jetstream.ErrDigestMismatch)
			}
			return 0, r.err
		}
		r.timer.Reset(r.stall)
		msg, err := r.it.Next()
		r.timer.Stop()
		if err != nil {
			r.whyMu.Lock()
			if r.why != nil {
				err = r.why
			}
			r.whyMu.Unlock()
			return 0, r.fail(fmt.Errorf("publish: get %s after %d of %d bytes: %w", r.name, r.got, r.size, err))
		}
		d := msg.Data()
		if r.got+uint64(len(d)) > r.size {
			return 0, r.fail(fmt.Errorf("publish: get %s: %w: chunks past its size %d", r.name, ErrCorrupt, r.size))
		}
		if collectEvery > 0 && r.size >= 2*collectEvery && (r.got+uint64(len(d)))/collectEvery != r.got/collectEvery {
			runtime.GC()
		}
		r.got += uint64(len(d))
		r.sum.Write(d)
		r.cur = d
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// fail ends the transfer with err, which every later Read returns.
func (r *objectReader) fail(err error) error {
	r.release()
	r.err = err
	return err
}

// release stops the consumer and the watches, once.
func (r *objectReader) release() {
	r.done.Do(func() {
		if r.it == nil {
			return
		}
		r.unwatch()
		r.timer.Stop()
		r.it.Stop()
	})
}

// Size is the object's size, as the store recorded it.
func (r *objectReader) Size() int64 { return int64(r.size) }

// Close ends the transfer; a Read after it fails.
func (r *objectReader) Close() error {
	r.release()
	if r.err == nil {
		r.err = fmt.Errorf("publish: get %s: read after close", r.name)
	}
	return nil
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

// WatchKeys waits for the buckets (every 250 ms), then watches keys. A
// consumer the server did not make for a passing fault (slower than
// nats.go's request timeout, no responder yet, a leader being elected) is
// asked for again, 250 ms doubling to 5 s apart: a watch ends with its
// context, not with a passing fault. A refusal (permissions, a bad
// request) is returned.
func (b *NATSBackend) WatchKeys(ctx context.Context, keys []string) (<-chan KeyUpdate, error) {
	wait := watchWaitFirst // before the consumer is asked for again
	for {
		pause := watchWaitFirst
		_, kv, err := b.handles(ctx)
		if err == nil {
			var w jetstream.KeyWatcher
			if w, err = kv.WatchFiltered(ctx, keys); err == nil {
				out := make(chan KeyUpdate)
				go watchSupervised(ctx, kv, keys, w, out, watchCheck)
				return out, nil
			}
			if !passing(err) && ctx.Err() == nil {
				return nil, fmt.Errorf("publish: watch %v: %w", keys, err)
			}
			pause, wait = wait, min(2*wait, watchWaitMax)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// watchWaitFirst and watchWaitMax bound WatchKeys' waits between tries.
const watchWaitFirst, watchWaitMax = 250 * time.Millisecond, 5 * time.Second

// passing reports whether err, from a JetStream request, is a fault that
// passes — the server slower than the request's timeout, no responder
// yet, the connection reconnecting, JetStream unavailable for the moment
// (a 5xx API error: no leader yet) — rather than a refusal that asking
// again does not change.
func passing(err error) bool {
	var api *nats.APIError
	var jsAPI *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrNoHeartbeat), errors.Is(err, jetstream.ErrNoHeartbeat):
		return true
	case errors.As(err, &api):
		return api.Code >= 500
	case errors.As(err, &jsAPI):
		return jsAPI.Code >= 500
	}
	return false
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
