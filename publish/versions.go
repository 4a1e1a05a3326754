package publish

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/streamkpca/streamkpca/snapshot"
)

// VersionInfo describes one stored version.
type VersionInfo struct {
	Version     uint64    `json:"version"`
	SamplesSeen uint64    `json:"samples_seen"`
	Created     time.Time `json:"created"`
	Features    int       `json:"features"`
	Size        int       `json:"size"`
	SHA256      string    `json:"sha256"`
}

// Versions are the stored versions of a model.
type Versions interface {
	// List returns the versions, newest first.
	List() ([]VersionInfo, error)
	// Load returns one version, or an error wrapping ErrNoVersion.
	Load(version uint64) (*snapshot.Model, []byte, error)
}

// ErrNoVersion: the version asked for is not stored (pruned, or never).
var ErrNoVersion = errors.New("publish: no such version")

// StoreVersions are the versions in a snapshot store (the service's
// snapshot.dir, which keeps snapshot.keep of them), served in their
// published form (snapshot.Snapshot.Served: no learner state, whatever
// the version's age), the last few built kept in a small cache.
type StoreVersions struct {
	Store *snapshot.Store
	// HoldBytes bounds the bytes of the versions held by requests under
	// way (Hold): a download held by a slow reader for the server's
	// write timeout keeps its version in memory, and 40 readers cycling
	// 5 versions through the cache once took the service past 1 GiB.
	// Default: DefaultHoldBytes.
	HoldBytes int64
	// CacheBytes bounds each cached version's generated feature blocks
	// a view. Default: VersionCacheBytes.
	CacheBytes int64

	holdOnce sync.Once
	held     *semaphore.Weighted
	loads    singleflight.Group

	mu    sync.Mutex
	cache []cachedVersion // most recently used last
	// infos are List's figures by version, with the file's size and
	// modification time they were read at: a version is read, encoded and
	// hashed once, not at every request. reads counts the files read.
	infos map[uint64]cachedInfo
	reads int
}

type cachedInfo struct {
	info VersionInfo
	size int64
	mod  time.Time
}

// NewStoreVersions returns the versions of store.
func NewStoreVersions(store *snapshot.Store) *StoreVersions { return &StoreVersions{Store: store} }

// Version cache bounds: at most VersionCacheN versions, each Model with
// a block cache of StoreVersions.CacheBytes (default VersionCacheBytes)
// per view (its feature blocks, generated as projections need them):
// with the published bytes and coefficients, about VersionCacheN × (2 ×
// size + views × CacheBytes) in all.
const (
	VersionCacheN     = 4
	VersionCacheBytes = 32 << 20
)

type cachedVersion struct {
	v    uint64
	m    *snapshot.Model
	data []byte
}

// List reads every stored version (skipping unreadable files); sizes and
// checksums are of the published form.
func (s *StoreVersions) List() ([]VersionInfo, error) {
	vs, err := s.Store.Versions()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[uint64]cachedInfo, len(vs))
	out := make([]VersionInfo, 0, len(vs))
	for _, v := range vs {
		path := s.Store.Path(v)
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		c, ok := s.infos[v]
		if !ok || c.size != st.Size() || !c.mod.Equal(st.ModTime()) {
			s.reads++
			snap, data, err := snapshot.Load(path)
			if err != nil {
				continue
			}
			if data, err = PublishedBytes(snap, data); err != nil {
				continue
			}
			sum := sha256.Sum256(data)
			c = cachedInfo{size: st.Size(), mod: st.ModTime(), info: VersionInfo{Version: v, SamplesSeen: snap.Header.SamplesSeen,
				Created: snap.Header.Created, Features: snap.Header.Features(), Size: len(data), SHA256: hex.EncodeToString(sum[:])}}
		}
		seen[v] = c
		out = append(out, c.info)
	}
	s.infos = seen // versions gone from the store leave the cache
	return out, nil
}

// DefaultHoldBytes is StoreVersions.HoldBytes's default.
const DefaultHoldBytes = 256 << 20

// Hold returns one version in its published form for a request, once the
// bytes of the versions other requests hold leave room for its file
// (waiting for ctx meanwhile); release gives the room back when the
// request is done with the version. A version larger than HoldBytes
// waits for all the room.
func (s *StoreVersions) Hold(ctx context.Context, version uint64) (*snapshot.Model, []byte, func(), error) {
	s.holdOnce.Do(func() {
		if s.HoldBytes <= 0 {
			s.HoldBytes = DefaultHoldBytes
		}
		s.held = semaphore.NewWeighted(s.HoldBytes)
	})
	st, err := os.Stat(s.Store.Path(version))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %d", ErrNoVersion, version)
	}
	n := min(max(st.Size(), 1), s.HoldBytes)
	if err := s.held.Acquire(ctx, n); err != nil {
		return nil, nil, nil, fmt.Errorf("publish: waiting for room to serve version %d: %w", version, err)
	}
	m, data, err := s.Load(version)
	if err != nil {
		s.held.Release(n)
		return nil, nil, nil, err
	}
	var once sync.Once
	return m, data, func() { once.Do(func() { s.held.Release(n) }) }, nil
}

// Load returns one version in its published form; concurrent loads of a
// version not in the cache read it once.
func (s *StoreVersions) Load(version uint64) (*snapshot.Model, []byte, error) {
	s.mu.Lock()
	for i, c := range s.cache {
		if c.v == version {
			s.cache = append(append(s.cache[:i:i], s.cache[i+1:]...), c)
			s.mu.Unlock()
			return c.m, c.data, nil
		}
	}
	s.mu.Unlock()
	v, err, _ := s.loads.Do(strconv.FormatUint(version, 10), func() (any, error) { return s.load(version) })
	if err != nil {
		return nil, nil, err
	}
	c := v.(cachedVersion)
	return c.m, c.data, nil
}

// load reads, encodes and caches one version.
func (s *StoreVersions) load(version uint64) (cachedVersion, error) {
	snap, data, err := snapshot.Load(s.Store.Path(version))
	if err != nil {
		// Not the path: it names the server's directory.
		return cachedVersion{}, fmt.Errorf("%w: %d", ErrNoVersion, version)
	}
	if data, err = PublishedBytes(snap, data); err != nil {
		return cachedVersion{}, err
	}
	served := snap.Served()
	// The served coefficients on their own: a file's values are read into
	// one array, and a version kept for its coefficients would keep the
	// learner state beside them (a scout's reference rows, an average).
	served.Coef = slices.Clone(served.Coef)
	for i := range served.Coef {
		served.Coef[i] = slices.Clone(served.Coef[i])
	}
	m, err := snapshot.NewModel(served, snapshot.ModelOptions{CacheBytes: cmp.Or(max(s.CacheBytes, 0), VersionCacheBytes)})
	if err != nil {
		return cachedVersion{}, err
	}
	c := cachedVersion{version, m, data}
	s.mu.Lock()
	s.cache = append(s.cache, c)
	if len(s.cache) > VersionCacheN {
		s.cache = s.cache[1:]
	}
	s.mu.Unlock()
	return c, nil
}

// PublishedBytes returns the published form of a snapshot read as data:
// data itself when it holds no learner state, else the encoding of
// snap.Served(), which is what the service publishes for that version
// (the same bytes and SHA-256).
func PublishedBytes(snap *snapshot.Snapshot, data []byte) ([]byte, error) {
	served := snap.Served()
	if served == snap { // nothing of the learner's to leave out
		return data, nil
	}
	return served.MarshalBinary()
}
