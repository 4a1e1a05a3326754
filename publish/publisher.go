package publish

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/snapshot"
)

// Config names the NATS resources of one model. Zero values mean the
// default.
type Config struct {
	// Prefix of subjects. Default: "streamkpca".
	Prefix string
	// Model name. Required; letters, digits, '-' and '_'.
	Model string
	// ObjectBucket holds snapshot versions. Default: "streamkpca-snapshots".
	ObjectBucket string
	// KVBucket maps model → latest notice. Default: "streamkpca-latest".
	KVBucket string
	// Keep is how many versions the object store retains. Default: 10.
	Keep int
	// Replicas is how many servers of a NATS cluster hold each bucket
	// (JetStream replicas, 1–5). Default: 1, what a single server can
	// hold; give 3 on a cluster of three or more, so that losing a server
	// loses neither a version nor the pointer. A writer applies it when it
	// creates the buckets, and updates buckets made with another count.
	Replicas int
	// OnSkip, if set, is called when Watch or Latest passes over a
	// version it cannot fetch (a pruned object, a pointer at a missing
	// object, a checksum mismatch), with the version's notice and why.
	OnSkip func(n Notice, err error)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// The defaults of Config (the service's nats settings take them).
const (
	DefaultPrefix       = "streamkpca"
	DefaultObjectBucket = "streamkpca-snapshots"
	DefaultKVBucket     = "streamkpca-latest"
	DefaultKeep         = 10
)

// SetDefaults fills zero fields and validates.
func (c *Config) SetDefaults() error {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.ObjectBucket == "" {
		c.ObjectBucket = DefaultObjectBucket
	}
	if c.KVBucket == "" {
		c.KVBucket = DefaultKVBucket
	}
	if c.Keep <= 0 {
		c.Keep = DefaultKeep
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("publish: replicas %d: JetStream holds a bucket on 1 to 5 servers", c.Replicas)
	}
	if !nameRE.MatchString(c.Model) {
		return fmt.Errorf("publish: model name %q must be letters, digits, '-' or '_'", c.Model)
	}
	for _, b := range []string{c.ObjectBucket, c.KVBucket} {
		if !nameRE.MatchString(b) {
			return fmt.Errorf("publish: bucket name %q must be letters, digits, '-' or '_'", b)
		}
	}
	return nil
}

// UpdatesSubject is where notices are published.
func (c *Config) UpdatesSubject() string { return c.Prefix + "." + c.Model + ".updates" }

// Notice announces one published version.
type Notice struct {
	Model string `json:"model"`
	// Incarnation is the model's incarnation (snapshot.Header.Incarnation):
	// versions order within one; a new one supersedes the old.
	Incarnation string    `json:"incarnation,omitempty"`
	Version     uint64    `json:"version"`
	SamplesSeen uint64    `json:"samples_seen"`
	Features    int       `json:"features"`
	Object      string    `json:"object"`
	Bucket      string    `json:"bucket"`
	Size        int       `json:"size"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	// Quality is the version's held-out score on its stream and Changes
	// the changes of the stream detected up to it (snapshot.Diagnostics);
	// absent where the model has none.
	Quality *snapshot.Quality `json:"quality,omitempty"`
	Changes uint64            `json:"changes,omitempty"`
	// Switches counts the times a challenger replaced the model
	// (snapshot.Diagnostics.Switches), Rollbacks the candidates
	// withdrawn without replacing it (snapshot.Diagnostics.Rollbacks).
	Switches  uint64 `json:"switches,omitempty"`
	Rollbacks uint64 `json:"rollbacks,omitempty"`
}

// ObjectName is the object store name of a version of an incarnation:
// <model>/<incarnation>/<version, 20 digits>, or <model>/<version> when
// the incarnation is empty (cluster mode, fit). Two incarnations never
// write one name.
func ObjectName(model, incarnation string, version uint64) string {
	if incarnation == "" {
		return fmt.Sprintf("%s/%020d", model, version)
	}
	return fmt.Sprintf("%s/%s/%020d", model, incarnation, version)
}

// Publisher publishes snapshots through a Backend. It is safe for
// concurrent use.
type Publisher struct {
	b   Backend
	cfg Config
	log zerolog.Logger
	// pins orders a pin (its object, then its key) against the deletions
	// of old versions (prune, withRoom): a deletion that read the pin key
	// before a pin wrote it would delete the version just pinned. A
	// context-bound semaphore, not a mutex: a network call that does not
	// return holds up the others only until their contexts end.
	pins *semaphore.Weighted
	// lease, when set, is renewed before anything is written: a
	// service that does not own the model's name publishes nothing.
	lease *Lease
	// pointer and pin fence the writes of the latest and pin keys
	// (fence): compare-and-set on the revision this publisher last
	// wrote, so that an owner frozen past its lease, or a write replayed
	// late, cannot move a key another owner has written since.
	pointer, pin fence
	// beforePoint, when set (tests), runs between the renewal and the
	// pointer write of Put: where a frozen owner would stop.
	beforePoint func()
	// collected: when the store's orphaned chunks were last collected
	// (collectOrphans); guarded by pins.
	collected time.Time
}

// orphanCollector is a Backend that can purge the chunks of puts cut
// short (NATSBackend.CollectOrphans).
type orphanCollector interface {
	CollectOrphans(ctx context.Context, grace time.Duration) (int, error)
}

// collectOrphans purges the chunks of puts cut short, older than
// OrphanGrace, at most every OrphanGrace/2; with now (a full store,
// nothing else to delete), at once and those older than
// FullStoreOrphanGrace. The caller holds pins. It reports whether it
// purged any.
func (p *Publisher) collectOrphans(ctx context.Context, now bool) bool {
	c, ok := p.b.(orphanCollector)
	if !ok || !now && time.Since(p.collected) < OrphanGrace/2 {
		return false
	}
	p.collected = time.Now()
	grace := OrphanGrace
	if now {
		grace = FullStoreOrphanGrace
	}
	n, err := c.CollectOrphans(ctx, grace)
	if err != nil {
		p.log.Debug().Err(err).Msg("publish: orphaned chunks not collected; trying again later")
	}
	if n > 0 {
		p.log.Info().Int("objects", n).Msg("publish: purged the chunks of puts cut short (a stop or a stall mid-publish)")
	}
	return n > 0
}

// fence is a key written only by compare-and-set on the revision of the
// last write this publisher made while holding the lease (gen: the
// lease's generation it was read in; another generation reads the key
// again).
type fence struct {
	rev, gen uint64
}

// Own makes every publish, pin and unpin hold a lease on the model's
// name for me first (one owner per model name: see Lease) and returns
// it; now is its clock (time.Now when nil). Call it before the
// publisher is used.
func (p *Publisher) Own(me Owner, now func() time.Time) (*Lease, error) {
	l, err := NewLease(p.b, p.cfg.Model, me, now)
	if err != nil {
		return nil, err
	}
	p.lease = l
	return l, nil
}

// Lease returns the lease set by Own, nil when none is.
func (p *Publisher) Lease() *Lease { return p.lease }

// hold renews the lease if there is one. A renewal is itself a write:
// refused for room (ErrStoreFull: the key and object buckets share the
// server's storage), it makes room as a put does — deleting the oldest
// version no reader needs — while the lease, renewed within its TTL, is
// still this publisher's; before, every publish failed at its renewal
// and nothing was ever deleted. Taking the lease when it is not held
// can make room only by purging abandoned chunks (below).
func (p *Publisher) hold(ctx context.Context) error {
	if p.lease == nil {
		return nil
	}
	err := p.lease.Hold(ctx)
	switch {
	case !errors.Is(err, ErrStoreFull):
	case p.lease.Held():
		var none Notice
		err = p.withRoom(ctx, &none, func() error { return p.lease.Hold(ctx) })
	default:
		// Taking a free or lapsed lease is a write too. In a store filled
		// with the chunks of a killed owner's cut-short puts, nobody could
		// take it, and only the owner makes room: the model was never
		// published again (TestCutShortPublishesInAFullStore). Abandoned
		// chunks are no live put's (FullStoreOrphanGrace), so purging them
		// needs no lease; then take it again.
		if p.pins.Acquire(ctx, 1) != nil {
			return err
		}
		purged := p.collectOrphans(ctx, true)
		p.pins.Release(1)
		if purged {
			err = p.lease.Hold(ctx)
		}
	}
	return err
}

// NewPublisher returns a publisher over NATS; buckets are created on first
// use, so it can be built while NATS is unreachable.
func NewPublisher(nc *nats.Conn, cfg Config, log zerolog.Logger) (*Publisher, error) {
	b, err := NewNATSBackend(nc, cfg, true)
	if err != nil {
		return nil, err
	}
	return NewPublisherOn(b, cfg, log)
}

// NewPublisherOn returns a publisher through b.
func NewPublisherOn(b Backend, cfg Config, log zerolog.Logger) (*Publisher, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	return &Publisher{b: b, cfg: cfg, log: log, pins: semaphore.NewWeighted(1)}, nil
}

// Config returns the configuration with defaults.
func (p *Publisher) Config() Config { return p.cfg }

// Publish stores data (the encoded snap) as a new version, points the
// latest key at it and announces it (Put), then prunes old versions
// (Prune).
func (p *Publisher) Publish(ctx context.Context, snap *snapshot.Snapshot, data []byte) (Notice, error) {
	n, err := p.Put(ctx, snap, data)
	if err != nil {
		return n, err
	}
	p.Prune(ctx, n)
	return n, nil
}

// Put stores data (the encoded snap) as a new version, points the latest
// key at it and announces it: once it returns nil the version is
// published, and readers move to it. Old versions stay until Prune.
func (p *Publisher) Put(ctx context.Context, snap *snapshot.Snapshot, data []byte) (Notice, error) {
	var n Notice
	if err := p.hold(ctx); err != nil {
		return n, err
	}
	err := p.withRoom(ctx, &n, func() (err error) {
		n, err = p.store(ctx, snap.Header, data)
		return err
	})
	if err != nil {
		return n, err
	}
	// Renewed again right before the pointer moves: the object's put
	// may have taken long enough for the lease to lapse and pass on.
	if err := p.hold(ctx); err != nil {
		return n, err
	}
	if p.beforePoint != nil {
		p.beforePoint()
	}
	js, _ := json.Marshal(n)
	if err := p.withRoom(ctx, &n, func() error { return p.fenced(ctx, &p.pointer, p.cfg.Model, js) }); err != nil {
		return n, fmt.Errorf("publish: point %s at %s: %w", p.cfg.Model, n.Object, err)
	}
	if err := p.b.Announce(p.cfg.UpdatesSubject(), js); err != nil {
		return n, err
	}
	return n, nil
}

// fenced writes value to key: without a lease, as it is; with one, by
// compare-and-set on the revision f holds, read when the lease is newly
// taken. A conflict means another writer came first: if the lease is no
// longer ours (renewing it says so) the write is refused with the
// lease's *NotOwnerError; if it is, the other write was a former
// owner's, late, and this one goes over it.
func (p *Publisher) fenced(ctx context.Context, f *fence, key string, value []byte) error {
	if p.lease == nil {
		return p.b.PutKey(ctx, key, value)
	}
	g := p.lease.generation()
	if g == 0 || !p.lease.Held() {
		// Not renewed within its TTL (or not held): renew before writing
		// anything; another owner's lease refuses it.
		if err := p.lease.Hold(ctx); err != nil {
			return err
		}
		g = p.lease.generation()
	}
	if g != f.gen {
		if err := p.readFence(ctx, f, key, g); err != nil {
			return err
		}
	}
	rev, err := p.b.SwapKey(ctx, key, value, f.rev)
	if errors.Is(err, ErrConflict) {
		f.gen = 0
		if herr := p.lease.Hold(ctx); herr != nil {
			return herr
		}
		p.log.Warn().Str("key", key).Msg("publish: a key this service owns was written by another; writing over it (a former owner's late write)")
		if err = p.readFence(ctx, f, key, p.lease.generation()); err != nil {
			return err
		}
		rev, err = p.b.SwapKey(ctx, key, value, f.rev)
	}
	if err != nil {
		f.gen = 0
		return err
	}
	f.rev = rev
	return nil
}

// readFence sets f to key's revision now, in lease generation g.
func (p *Publisher) readFence(ctx context.Context, f *fence, key string, g uint64) error {
	_, rev, err := p.b.GetKeyRevision(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		rev = 0
	case err != nil:
		return fmt.Errorf("publish: read %s before writing it: %w", key, err)
	}
	f.rev, f.gen = rev, g
	return nil
}

// ownsPointer reports whether this publisher may act as the pointer's
// writer now: without a lease always; with one, while the lease is held
// and the pointer's revision is still the one this publisher last
// wrote (nobody has moved it since).
func (p *Publisher) ownsPointer(ctx context.Context) bool {
	if p.lease == nil {
		return true
	}
	if !p.lease.Held() || p.pointer.gen != p.lease.generation() || p.pointer.gen == 0 {
		return false
	}
	_, rev, err := p.b.GetKeyRevision(ctx, p.cfg.Model)
	return err == nil && rev == p.pointer.rev
}

// store puts a version's bytes in the object store and returns its notice.
func (p *Publisher) store(ctx context.Context, h snapshot.Header, data []byte) (Notice, error) {
	sum := sha256.Sum256(data)
	n := Notice{
		Model: p.cfg.Model, Incarnation: h.Incarnation, Version: h.Version(), SamplesSeen: h.SamplesSeen,
		Features: h.Features(), Object: ObjectName(p.cfg.Model, h.Incarnation, h.Version()),
		Bucket: p.cfg.ObjectBucket, Size: len(data), SHA256: hex.EncodeToString(sum[:]), Created: h.Created,
		Quality: h.Diagnostics.Quality, Changes: h.Diagnostics.Changes, Switches: h.Diagnostics.Switches, Rollbacks: h.Diagnostics.Rollbacks,
	}
	meta := map[string]string{metaIncarnation: h.Incarnation, metaVersion: strconv.FormatUint(n.Version, 10)}
	if err := p.b.PutObject(ctx, n.Object, meta, bytes.NewReader(data)); err != nil {
		return n, err
	}
	return n, nil
}

// maxPruneToFit bounds the old versions one put deletes to make room.
const maxPruneToFit = 64

// withRoom runs put, and while the store says it is full
// (ErrStoreFull) deletes the oldest version no reader needs for n
// (oldestPrunable) and runs it again.
func (p *Publisher) withRoom(ctx context.Context, n *Notice, put func() error) error {
	err := put()
	for tries := 0; errors.Is(err, ErrStoreFull) && tries < maxPruneToFit; tries++ {
		if p.pins.Acquire(ctx, 1) != nil {
			break
		}
		victim, ok := p.oldestPrunable(ctx, *n)
		derr := errors.New("nothing to delete")
		if ok {
			derr = p.b.DeleteObject(ctx, victim)
		} else if p.collectOrphans(ctx, true) {
			victim, derr = "(chunks of puts cut short)", nil
		}
		p.pins.Release(1)
		if derr != nil {
			break
		}
		p.log.Warn().Str("deleted", victim).Str("object", n.Object).Msg("publish: object store full; deleted an old version to make room")
		err = put()
	}
	return err
}

// oldestPrunable names the stored version of the model a full store gives
// up first for version n: never n itself, the one the latest pointer names
// or the pinned one; other incarnations' before this one's, oldest first.
func (p *Publisher) oldestPrunable(ctx context.Context, n Notice) (string, bool) {
	lst, err := p.b.ListObjects(ctx)
	if err != nil {
		return "", false
	}
	keep := map[string]bool{n.Object: true}
	for _, key := range []string{p.cfg.Model, PinKey(p.cfg.Model)} {
		if v, err := p.b.GetKey(ctx, key); err == nil {
			var k Notice
			if json.Unmarshal(v, &k) == nil {
				keep[k.Object] = true
			}
		}
	}
	prefix := p.cfg.Model + "/"
	best, bestMine, bestV := "", true, uint64(0)
	for _, o := range lst {
		if !strings.HasPrefix(o.Name, prefix) || keep[o.Name] {
			continue
		}
		v, err := strconv.ParseUint(o.Metadata[metaVersion], 10, 64)
		if err != nil {
			v, _ = strconv.ParseUint(strings.TrimPrefix(o.Name, prefix), 10, 64)
		}
		mine := o.Metadata[metaIncarnation] == n.Incarnation
		if best == "" || (bestMine && !mine) || (mine == bestMine && v < bestV) {
			best, bestMine, bestV = o.Name, mine, v
		}
	}
	return best, best != ""
}

// PinKey is the KV key that names the pinned version of model, if any.
func PinKey(model string) string { return model + ".pin" }

// Pin makes every Watch of the model follow version m (data: its bytes)
// instead of the newest, until Unpin: the version is (re)stored in the
// Object Store and the pin key points at it.
func (p *Publisher) Pin(ctx context.Context, m *snapshot.Model, data []byte) error {
	if err := p.pins.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("publish: pin %s: %w", p.cfg.Model, err)
	}
	defer p.pins.Release(1)
	if err := p.hold(ctx); err != nil {
		return fmt.Errorf("publish: pin %s: %w", p.cfg.Model, err)
	}
	n, err := p.store(ctx, *m.Header(), data)
	if err != nil {
		return err
	}
	js, _ := json.Marshal(n)
	if err := p.fenced(ctx, &p.pin, PinKey(p.cfg.Model), js); err != nil {
		return fmt.Errorf("publish: pin %s at %s: %w", p.cfg.Model, n.Object, err)
	}
	return nil
}

// PinnedVersion returns the version the pin key names, 0 when none does.
func (p *Publisher) PinnedVersion(ctx context.Context) (uint64, error) {
	n, err := p.Pinned(ctx)
	return n.Version, err
}

// Pinned returns the notice the pin key holds — a version of one
// incarnation — and a zero Notice when there is no pin.
func (p *Publisher) Pinned(ctx context.Context) (Notice, error) {
	var n Notice
	v, err := p.b.GetKey(ctx, PinKey(p.cfg.Model))
	if errors.Is(err, ErrNotFound) {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("publish: read the pin of %s: %w", p.cfg.Model, err)
	}
	if err := json.Unmarshal(v, &n); err != nil {
		return Notice{}, fmt.Errorf("publish: the pin of %s: %w", p.cfg.Model, err)
	}
	return n, nil
}

// Unpin lets every Watch follow the newest version again.
func (p *Publisher) Unpin(ctx context.Context) error {
	if err := p.pins.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("publish: unpin %s: %w", p.cfg.Model, err)
	}
	defer p.pins.Release(1)
	if err := p.hold(ctx); err != nil {
		return fmt.Errorf("publish: unpin %s: %w", p.cfg.Model, err)
	}
	p.pin.gen = 0 // the delete moves the pin key's revision: read it again at the next pin
	if err := p.b.DeleteKey(ctx, PinKey(p.cfg.Model)); err != nil {
		return fmt.Errorf("publish: unpin %s: %w", p.cfg.Model, err)
	}
	return nil
}

// StoreUsage says how full the object store is; false when the backend
// cannot tell.
func (p *Publisher) StoreUsage(ctx context.Context) (StoreUsage, bool, error) {
	r, ok := p.b.(UsageReporter)
	if !ok {
		return StoreUsage{}, false, nil
	}
	u, err := r.StoreUsage(ctx)
	return u, err == nil, err
}

// Reset drops the backend's cached handles; the next Publish looks them
// up again (after a call was abandoned, or the server was replaced).
func (p *Publisher) Reset() { p.b.Reset() }

// Object metadata keys: the incarnation and version of a stored object.
const (
	metaIncarnation = "incarnation"
	metaVersion     = "version"
)

// Prune deletes stored versions readers no longer need, after latest
// (just published) was pointed at: of latest's incarnation, all but the
// newest Keep by version; of any other incarnation, every one once latest's
// incarnation has Keep of its own (readers have moved to it by then).
// It never deletes latest, nor the pinned version. Objects stored before
// incarnations existed count as incarnation "". It is best effort: what
// it cannot reach or delete now, the next Prune deletes.
func (p *Publisher) Prune(ctx context.Context, latest Notice) {
	if p.pins.Acquire(ctx, 1) != nil {
		return // the next publish prunes
	}
	defer p.pins.Release(1)
	p.collectOrphans(ctx, false)
	lst, err := p.b.ListObjects(ctx)
	if err != nil {
		return
	}
	pinned := ""
	if v, err := p.b.GetKey(ctx, PinKey(p.cfg.Model)); err == nil {
		var n Notice
		if json.Unmarshal(v, &n) == nil {
			pinned = n.Object
		}
	}
	type stored struct {
		name string
		v    uint64
	}
	prefix := p.cfg.Model + "/"
	var mine, other []stored
	for _, o := range lst {
		if !strings.HasPrefix(o.Name, prefix) || o.Name == latest.Object || o.Name == pinned {
			continue
		}
		v, err := strconv.ParseUint(o.Metadata[metaVersion], 10, 64)
		if err != nil { // stored before metadata: the name holds the version
			v, _ = strconv.ParseUint(strings.TrimPrefix(o.Name, prefix), 10, 64)
		}
		if o.Metadata[metaIncarnation] == latest.Incarnation {
			mine = append(mine, stored{o.Name, v})
		} else {
			other = append(other, stored{o.Name, v})
		}
	}
	// latest counts as one of the Keep.
	slices.SortFunc(mine, func(a, b stored) int { return cmp.Compare(b.v, a.v) }) // newest first
	var drop []string
	for i, o := range mine {
		if i+1 >= p.cfg.Keep {
			drop = append(drop, o.name)
		}
	}
	// Other incarnations' versions go only while this publisher still
	// owns the pointer: an owner that lost its lease while frozen, or a
	// copy of it, must not delete its successor's versions.
	if len(mine)+1 >= p.cfg.Keep && len(other) > 0 && p.ownsPointer(ctx) {
		for _, o := range other {
			drop = append(drop, o.name)
		}
	}
	for _, name := range drop {
		if err := p.b.DeleteObject(ctx, name); err != nil {
			p.log.Warn().Err(err).Str("object", name).Msg("publish: pruning an old version failed")
		}
	}
}

// ErrNoModel is returned when no version has been published yet.
var ErrNoModel = errors.New("publish: no model version published yet")

// ErrWatchClosed is returned (wrapped) by Watch when the key watch ends
// while its context is live: the connection closed for good or the KV
// bucket went away. Nothing more would be delivered; watch again.
var ErrWatchClosed = errors.New("publish: the watch of the model's keys ended (the NATS connection closed or the KV bucket was deleted)")

// Latest fetches the newest published version of a model over NATS.
func Latest(ctx context.Context, nc *nats.Conn, cfg Config) (*snapshot.Model, Notice, error) {
	b, err := NewNATSBackend(nc, cfg, false)
	if err != nil {
		return nil, Notice{}, err
	}
	return LatestFrom(ctx, b, cfg)
}

// LatestFrom fetches the newest published version of a model through b:
// the version the latest pointer names, or, when that cannot be fetched,
// the newest stored version of its incarnation that can.
func LatestFrom(ctx context.Context, b Backend, cfg Config) (*snapshot.Model, Notice, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, Notice{}, err
	}
	v, err := b.GetKey(ctx, cfg.Model)
	if errors.Is(err, ErrNotFound) {
		return nil, Notice{}, ErrNoModel
	}
	if err != nil {
		return nil, Notice{}, fmt.Errorf("publish: get latest: %w", err)
	}
	m, n, err := fetch(ctx, b, v)
	if err == nil {
		return m, n, nil
	}
	if cfg.OnSkip != nil {
		cfg.OnSkip(n, err)
	}
	if m, n2, err2 := newestStored(ctx, b, cfg, n.Incarnation); err2 == nil {
		return m, n2, nil
	}
	return nil, n, err
}

// newestStored fetches the newest stored version of incarnation inc
// that can be fetched, checked against the store's own digest,
// reporting the others to cfg.OnSkip.
func newestStored(ctx context.Context, b Backend, cfg Config, inc string) (*snapshot.Model, Notice, error) {
	lst, err := b.ListObjects(ctx)
	if err != nil {
		return nil, Notice{}, err
	}
	prefix := cfg.Model + "/"
	var cands []ObjectInfo
	for _, o := range lst {
		if strings.HasPrefix(o.Name, prefix) && o.Metadata[metaIncarnation] == inc {
			cands = append(cands, o)
		}
	}
	version := func(o ObjectInfo) uint64 {
		v, _ := strconv.ParseUint(o.Metadata[metaVersion], 10, 64)
		return v
	}
	slices.SortFunc(cands, func(a, b ObjectInfo) int { return cmp.Compare(version(b), version(a)) })
	for _, o := range cands {
		n := Notice{Model: cfg.Model, Incarnation: inc, Version: version(o), Object: o.Name, Bucket: cfg.ObjectBucket}
		m, n, err := readVersion(ctx, b, n)
		if err == nil {
			return m, n, nil
		}
		if cfg.OnSkip != nil {
			cfg.OnSkip(n, err)
		}
	}
	return nil, Notice{}, fmt.Errorf("publish: no stored version of %s (incarnation %q) can be fetched", cfg.Model, inc)
}

// readVersion reads the object n names, as it comes (its bytes are
// never held whole), decodes it into a Model and fills n from its
// header, size and digest.
func readVersion(ctx context.Context, b Backend, n Notice) (*snapshot.Model, Notice, error) {
	rc, err := b.GetObject(ctx, n.Object)
	if err != nil {
		return nil, n, err
	}
	defer rc.Close()
	sum := sha256.New()
	var src io.Reader = io.TeeReader(rc, sum)
	if s, ok := rc.(interface{ Size() int64 }); ok {
		src = sized{src, s.Size()}
	}
	var snap snapshot.Snapshot
	size, err := snap.ReadFrom(src)
	if err != nil {
		return nil, n, fmt.Errorf("publish: %s: %w", n.Object, err)
	}
	// The backend checks the object's digest when its end is read: a
	// version is taken only then, and only if nothing follows the
	// snapshot.
	if extra, err := io.Copy(io.Discard, rc); err != nil || extra > 0 {
		if err == nil {
			err = fmt.Errorf("%w: %d bytes after the snapshot", snapshot.ErrSize, extra)
		}
		return nil, n, fmt.Errorf("publish: %s: %w", n.Object, err)
	}
	h := snap.Header
	n.Version, n.SamplesSeen, n.Features, n.Created = h.Version(), h.SamplesSeen, h.Features(), h.Created
	n.Size, n.Quality, n.Changes = int(size), h.Diagnostics.Quality, h.Diagnostics.Changes
	n.SHA256 = hex.EncodeToString(sum.Sum(nil))
	m, err := snapshot.NewModel(&snap, snapshot.ModelOptions{})
	if err != nil {
		return nil, n, err
	}
	return m, n, nil
}

// sized is a reader that says its size (see snapshot.Snapshot.ReadFrom).
type sized struct {
	io.Reader
	size int64
}

func (s sized) Size() int64 { return s.size }

// fetch reads the version a notice names, checked against the notice's
// digest; it returns the notice as it came.
func fetch(ctx context.Context, b Backend, notice []byte) (*snapshot.Model, Notice, error) {
	var n Notice
	if err := json.Unmarshal(notice, &n); err != nil {
		return nil, n, fmt.Errorf("publish: bad notice: %w", err)
	}
	m, got, err := readVersion(ctx, b, n)
	if err != nil {
		return nil, n, err
	}
	if got.SHA256 != n.SHA256 {
		return nil, n, fmt.Errorf("publish: %s: sha256 mismatch", n.Object)
	}
	return m, n, nil
}

// Watch calls fn with a ready Model for the version served to clients:
// the newest published version, or the one an operator pinned (Pin),
// which may be older; then again each time that changes (a newer version,
// a pin, an unpin, a new incarnation), until ctx is done; it returns
// ctx.Err(). The rules (docs/api.md): within an incarnation versions only
// go forward; a notice of another incarnation is followed whatever its
// version (a model restarted without its history starts again at low
// versions); a version that cannot be fetched (pruned, missing,
// corrupt, or a fetch that met a fault) is reported to cfg.OnSkip and
// does not count as seen: it is tried again after a backoff (0.5 s
// doubling to 30 s) until it is fetched or a newer version is announced,
// and the next fetchable version is delivered. Buckets that do not exist
// yet are waited for, and a watch the server did not make at once is
// asked for again.
func Watch(ctx context.Context, nc *nats.Conn, cfg Config, fn func(*snapshot.Model, Notice)) error {
	b, err := NewNATSBackend(nc, cfg, false)
	if err != nil {
		return err
	}
	return WatchFrom(ctx, b, cfg, fn)
}

// WatchFrom is Watch through b.
func WatchFrom(ctx context.Context, b Backend, cfg Config, fn func(*snapshot.Model, Notice)) error {
	if err := cfg.SetDefaults(); err != nil {
		return err
	}
	updates, err := b.WatchKeys(ctx, []string{cfg.Model, PinKey(cfg.Model)})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("publish: watch %s: %w", cfg.Model, err)
	}
	var f follower
	initial := true
	// A fetch that failed is tried again after a backoff while nothing
	// newer comes: without it a reader whose fetch of the newest version
	// met a passing fault (a stream leader being elected, a link down)
	// stayed on the version before until the next one was published.
	var retry <-chan time.Time
	backoff := watchRetryFirst
	deliver := func() {
		retry = nil
		want, ok := f.next()
		if !ok {
			return
		}
		m, n, err := fetch(ctx, b, want)
		if err != nil {
			if ctx.Err() == nil {
				if cfg.OnSkip != nil {
					cfg.OnSkip(n, err)
				}
				retry, backoff = time.After(backoff), min(2*backoff, watchRetryMax)
			}
			return
		}
		backoff = watchRetryFirst
		f.delivered(n)
		fn(m, n)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-retry:
			deliver()
		case u, ok := <-updates:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return fmt.Errorf("%w: %s", ErrWatchClosed, cfg.Model)
			}
			switch {
			case u.Initial: // the initial values are in: deliver what they say
				initial = false
			case u.Key == PinKey(cfg.Model) && !u.Deleted:
				f.pinned = u.Value
			case u.Key == PinKey(cfg.Model):
				f.pinned = nil // deleted or purged: unpinned
			case !u.Deleted:
				f.latest = u.Value
			default:
				continue
			}
			if initial {
				continue
			}
			deliver()
		}
	}
}

// watchRetryFirst and watchRetryMax bound Watch's backoff between tries
// of a fetch that failed.
const watchRetryFirst, watchRetryMax = 500 * time.Millisecond, 30 * time.Second

// follower decides what Watch delivers next (see Watch): the pinned
// notice while there is one, else the latest pointer when it moves
// forward within the delivered incarnation or names another.
type follower struct {
	latest, pinned []byte // the KV values
	has            bool   // something was delivered
	inc            string // what was delivered: incarnation, version
	v              uint64
	pinnedV        bool // and whether it was the pinned one
}

// next returns the notice to fetch, false when there is nothing new.
func (f *follower) next() ([]byte, bool) {
	want := f.latest
	if f.pinned != nil {
		want = f.pinned
	}
	var n Notice
	if want == nil || json.Unmarshal(want, &n) != nil {
		return nil, false
	}
	if !f.has || n.Incarnation != f.inc {
		return want, true
	}
	if f.pinned != nil {
		return want, n.Version != f.v // a pin may name an older version
	}
	return want, n.Version > f.v || f.wasPinned(n)
}

// wasPinned: after an unpin the latest is delivered even when older than
// the pinned version that was.
func (f *follower) wasPinned(n Notice) bool { return n.Version != f.v && f.pinnedV }

// delivered records what Watch delivered.
func (f *follower) delivered(n Notice) {
	f.has, f.inc, f.v = true, n.Incarnation, n.Version
	f.pinnedV = f.pinned != nil
}
