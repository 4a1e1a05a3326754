package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
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
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// SetDefaults fills zero fields and validates.
func (c *Config) SetDefaults() error {
	d := configs.Default().NATS // the defaults are stated there, once
	if c.Prefix == "" {
		c.Prefix = d.Prefix
	}
	if c.ObjectBucket == "" {
		c.ObjectBucket = d.ObjectBucket
	}
	if c.KVBucket == "" {
		c.KVBucket = d.KVBucket
	}
	if c.Keep <= 0 {
		c.Keep = d.Keep
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
	Model       string    `json:"model"`
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
}

// ObjectName is the object store name of a version.
func ObjectName(model string, version uint64) string {
	return fmt.Sprintf("%s/%020d", model, version)
}

// Publisher publishes snapshots. It is safe for concurrent use.
type Publisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
	log zerolog.Logger

	mu  sync.Mutex
	obs jetstream.ObjectStore
	kv  jetstream.KeyValue
}

// NewPublisher returns a publisher; buckets are created on first use, so
// it can be built while NATS is unreachable.
func NewPublisher(nc *nats.Conn, cfg Config, log zerolog.Logger) (*Publisher, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("publish: jetstream: %w", err)
	}
	return &Publisher{nc: nc, js: js, cfg: cfg, log: log}, nil
}

// Config returns the configuration with defaults.
func (p *Publisher) Config() Config { return p.cfg }

func buckets(ctx context.Context, js jetstream.JetStream, cfg Config, create bool) (jetstream.ObjectStore, jetstream.KeyValue, error) {
	var obs jetstream.ObjectStore
	var kv jetstream.KeyValue
	var err error
	if create {
		obs, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: cfg.ObjectBucket, Description: "streamkpca snapshot versions", Storage: jetstream.FileStorage})
	} else {
		obs, err = js.ObjectStore(ctx, cfg.ObjectBucket)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("publish: object store %q: %w", cfg.ObjectBucket, err)
	}
	if create {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cfg.KVBucket, Description: "streamkpca latest snapshot per model", History: 5, Storage: jetstream.FileStorage})
	} else {
		kv, err = js.KeyValue(ctx, cfg.KVBucket)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("publish: key-value bucket %q: %w", cfg.KVBucket, err)
	}
	return obs, kv, nil
}

// Publish stores data (the encoded snap) as a new version, points the
// latest key at it, announces it, and prunes old versions.
//
// The mutex guards only the bucket handles, never a network call, so that
// a call the NATS client fails to return from cannot block the next one.
func (p *Publisher) Publish(ctx context.Context, snap *snapshot.Snapshot, data []byte) (Notice, error) {
	obs, kv, err := p.handles(ctx)
	if err != nil {
		return Notice{}, err
	}
	n, err := p.store(ctx, obs, snap.Header, data)
	if err != nil {
		return n, err
	}
	js, _ := json.Marshal(n)
	if _, err := kv.Put(ctx, p.cfg.Model, js); err != nil {
		return n, fmt.Errorf("publish: point %s at %s: %w", p.cfg.Model, n.Object, err)
	}
	if err := p.nc.Publish(p.cfg.UpdatesSubject(), js); err != nil {
		return n, fmt.Errorf("publish: notice: %w", err)
	}
	p.prune(ctx, obs)
	return n, nil
}

// handles returns the bucket handles, creating the buckets on first use.
func (p *Publisher) handles(ctx context.Context) (jetstream.ObjectStore, jetstream.KeyValue, error) {
	p.mu.Lock()
	obs, kv := p.obs, p.kv
	p.mu.Unlock()
	if obs != nil {
		return obs, kv, nil
	}
	obs, kv, err := buckets(ctx, p.js, p.cfg, true)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	p.obs, p.kv = obs, kv
	p.mu.Unlock()
	return obs, kv, nil
}

// store puts a version's bytes in the Object Store and returns its notice.
func (p *Publisher) store(ctx context.Context, obs jetstream.ObjectStore, h snapshot.Header, data []byte) (Notice, error) {
	sum := sha256.Sum256(data)
	n := Notice{
		Model: p.cfg.Model, Version: h.Version(), SamplesSeen: h.SamplesSeen,
		Features: h.Features(), Object: ObjectName(p.cfg.Model, h.Version()),
		Bucket: p.cfg.ObjectBucket, Size: len(data), SHA256: hex.EncodeToString(sum[:]), Created: h.Created,
		Quality: h.Diagnostics.Quality, Changes: h.Diagnostics.Changes,
	}
	if _, err := obs.PutBytes(ctx, n.Object, data); err != nil {
		return n, fmt.Errorf("publish: put %s: %w", n.Object, err)
	}
	return n, nil
}

// PinKey is the KV key that names the pinned version of model, if any.
func PinKey(model string) string { return model + ".pin" }

// Pin makes every Watch of the model follow version m (data: its bytes)
// instead of the newest, until Unpin: the version is (re)stored in the
// Object Store and the pin key points at it.
func (p *Publisher) Pin(ctx context.Context, m *snapshot.Model, data []byte) error {
	obs, kv, err := p.handles(ctx)
	if err != nil {
		return err
	}
	n, err := p.store(ctx, obs, *m.Header(), data)
	if err != nil {
		return err
	}
	js, _ := json.Marshal(n)
	if _, err := kv.Put(ctx, PinKey(p.cfg.Model), js); err != nil {
		return fmt.Errorf("publish: pin %s at %s: %w", p.cfg.Model, n.Object, err)
	}
	return nil
}

// PinnedVersion returns the version the pin key names, 0 when none does.
func (p *Publisher) PinnedVersion(ctx context.Context) (uint64, error) {
	_, kv, err := p.handles(ctx)
	if err != nil {
		return 0, err
	}
	e, err := kv.Get(ctx, PinKey(p.cfg.Model))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("publish: read the pin of %s: %w", p.cfg.Model, err)
	}
	var n Notice
	if err := json.Unmarshal(e.Value(), &n); err != nil {
		return 0, fmt.Errorf("publish: the pin of %s: %w", p.cfg.Model, err)
	}
	return n.Version, nil
}

// Unpin lets every Watch follow the newest version again.
func (p *Publisher) Unpin(ctx context.Context) error {
	_, kv, err := p.handles(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, PinKey(p.cfg.Model)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("publish: unpin %s: %w", p.cfg.Model, err)
	}
	return nil
}

// Reset drops the cached bucket handles; the next Publish looks them up
// again (after a call was abandoned, or the server was replaced).
func (p *Publisher) Reset() {
	p.mu.Lock()
	p.obs, p.kv = nil, nil
	p.mu.Unlock()
}

func (p *Publisher) prune(ctx context.Context, obs jetstream.ObjectStore) {
	lst, err := obs.List(ctx)
	if err != nil {
		return
	}
	prefix := p.cfg.Model + "/"
	var names []string
	for _, o := range lst {
		if len(o.Name) > len(prefix) && o.Name[:len(prefix)] == prefix {
			names = append(names, o.Name)
		}
	}
	// Names sort by version (zero-padded); List returns them in any order.
	slices.Sort(names)
	for i := 0; i+p.cfg.Keep < len(names); i++ {
		if err := obs.Delete(ctx, names[i]); err != nil {
			p.log.Warn().Err(err).Str("object", names[i]).Msg("publish: pruning an old version failed")
		}
	}
}

// ErrNoModel is returned when no version has been published yet.
var ErrNoModel = errors.New("publish: no model version published yet")

// Latest fetches the newest published version of a model.
func Latest(ctx context.Context, nc *nats.Conn, cfg Config) (*snapshot.Model, Notice, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, Notice{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, Notice{}, err
	}
	obs, kv, err := buckets(ctx, js, cfg, false)
	if err != nil {
		return nil, Notice{}, err
	}
	e, err := kv.Get(ctx, cfg.Model)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, Notice{}, ErrNoModel
	}
	if err != nil {
		return nil, Notice{}, fmt.Errorf("publish: get latest: %w", err)
	}
	return fetch(ctx, obs, e.Value())
}

func fetch(ctx context.Context, obs jetstream.ObjectStore, notice []byte) (*snapshot.Model, Notice, error) {
	var n Notice
	if err := json.Unmarshal(notice, &n); err != nil {
		return nil, n, fmt.Errorf("publish: bad notice: %w", err)
	}
	data, err := obs.GetBytes(ctx, n.Object)
	if err != nil {
		return nil, n, fmt.Errorf("publish: get %s: %w", n.Object, err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != n.SHA256 {
		return nil, n, fmt.Errorf("publish: %s: sha256 mismatch", n.Object)
	}
	snap, err := snapshot.Decode(data)
	if err != nil {
		return nil, n, err
	}
	m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		return nil, n, err
	}
	return m, n, nil
}

// Watch calls fn with a ready Model for the version served to clients:
// the newest published version, or the one an operator pinned (Pin),
// which may be older; then again each time that changes (a newer version,
// a pin, an unpin), until ctx is done; it returns ctx.Err(). Without pins
// the versions come in increasing order. Versions that cannot be fetched
// (pruned, corrupt) are skipped. Buckets that do not exist yet are waited
// for.
func Watch(ctx context.Context, nc *nats.Conn, cfg Config, fn func(*snapshot.Model, Notice)) error {
	if err := cfg.SetDefaults(); err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var obs jetstream.ObjectStore
	var kv jetstream.KeyValue
	for {
		obs, kv, err = buckets(ctx, js, cfg, false)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	w, err := kv.WatchFiltered(ctx, []string{cfg.Model, PinKey(cfg.Model)})
	if err != nil {
		return fmt.Errorf("publish: watch %s: %w", cfg.Model, err)
	}
	defer w.Stop()
	var newest, pinned []byte // notices
	var newestV, deliveredV uint64
	delivered, initial := false, true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return ctx.Err()
			}
			var n Notice
			switch {
			case e == nil: // the initial values are in: deliver what they say
				initial = false
			case e.Key() == PinKey(cfg.Model) && e.Operation() == jetstream.KeyValuePut:
				pinned = e.Value()
			case e.Key() == PinKey(cfg.Model):
				pinned = nil // deleted or purged: unpinned
			case e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &n) == nil && n.Version > newestV:
				newest, newestV = e.Value(), n.Version
			default:
				continue
			}
			if initial {
				continue
			}
			want := newest
			if pinned != nil {
				want = pinned
			}
			if want == nil || json.Unmarshal(want, &n) != nil || (delivered && n.Version == deliveredV) {
				continue
			}
			m, n, err := fetch(ctx, obs, want)
			if err != nil {
				continue
			}
			deliveredV, delivered = n.Version, true
			fn(m, n)
		}
	}
}
