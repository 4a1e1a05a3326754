package publishtest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/publish/publishtest"
)

// noCAS swaps a key whatever its revision: no compare in the
// compare-and-swap.
type noCAS struct{ *publish.MemBackend }

func (b noCAS) SwapKey(ctx context.Context, key string, value []byte, _ uint64) (uint64, error) {
	if err := b.PutKey(ctx, key, value); err != nil {
		return 0, err
	}
	_, rev, err := b.GetKeyRevision(ctx, key)
	return rev, err
}

// hoarding says it deleted an object and keeps it.
type hoarding struct{ *publish.MemBackend }

func (hoarding) DeleteObject(context.Context, string) error { return nil }

// amnesic never finds a key's revision, and swaps whatever it is: a
// backend without the compare-and-swap the lease is built on.
type amnesic struct{ noCAS }

func (amnesic) GetKeyRevision(context.Context, string) ([]byte, uint64, error) {
	return nil, 0, publish.ErrNotFound
}

// unlisted stores objects and never lists them.
type unlisted struct{ *publish.MemBackend }

func (unlisted) ListObjects(context.Context) ([]publish.ObjectInfo, error) { return nil, nil }

// partial stores what a put read before its reader failed.
type partial struct{ *publish.MemBackend }

func (b partial) PutObject(ctx context.Context, name string, meta map[string]string, r io.Reader) error {
	data, err := io.ReadAll(r)
	if perr := b.MemBackend.PutObject(ctx, name, meta, bytes.NewReader(data)); perr != nil {
		return perr
	}
	return err
}

// oneRead stores what one read of up to 128 KiB gives, as if a read
// always filled its buffer.
type oneRead struct{ *publish.MemBackend }

func (b oneRead) PutObject(ctx context.Context, name string, meta map[string]string, r io.Reader) error {
	buf := make([]byte, 128<<10)
	n, err := r.Read(buf)
	if err != nil && err != io.EOF {
		return err
	}
	return b.MemBackend.PutObject(ctx, name, meta, bytes.NewReader(buf[:n]))
}

// shortGet ends every get after 64 KiB, as if the object ended there.
type shortGet struct{ *publish.MemBackend }

func (b shortGet) GetObject(ctx context.Context, name string) (io.ReadCloser, error) {
	rc, err := b.MemBackend.GetObject(ctx, name)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, 64<<10), rc}, nil
}

// nameless lists objects without their metadata.
type nameless struct{ *publish.MemBackend }

func (b nameless) ListObjects(ctx context.Context) ([]publish.ObjectInfo, error) {
	lst, err := b.MemBackend.ListObjects(ctx)
	for i := range lst {
		lst[i].Metadata = nil
	}
	return lst, err
}

// staleRevision swaps as it should and returns the key's revision
// before the swap.
type staleRevision struct{ *publish.MemBackend }

func (b staleRevision) SwapKey(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if _, err := b.MemBackend.SwapKey(ctx, key, value, rev); err != nil {
		return 0, err
	}
	return rev, nil
}

// keeping refuses to replace a stored object, saying nothing.
type keeping struct{ *publish.MemBackend }

func (b keeping) PutObject(ctx context.Context, name string, meta map[string]string, r io.Reader) error {
	if rc, err := b.MemBackend.GetObject(ctx, name); err == nil {
		rc.Close()
		_, err := io.Copy(io.Discard, r)
		return err
	}
	return b.MemBackend.PutObject(ctx, name, meta, r)
}

// phantom gives an empty object for a name never stored.
type phantom struct{ *publish.MemBackend }

func (b phantom) GetObject(ctx context.Context, name string) (io.ReadCloser, error) {
	rc, err := b.MemBackend.GetObject(ctx, name)
	if errors.Is(err, publish.ErrNotFound) {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	return rc, err
}

// unspecific says a key is not set in its own words, not ErrNotFound.
type unspecific struct{ *publish.MemBackend }

func (b unspecific) GetKey(ctx context.Context, key string) ([]byte, error) {
	v, err := b.MemBackend.GetKey(ctx, key)
	if errors.Is(err, publish.ErrNotFound) {
		err = errors.New("no such key")
	}
	return v, err
}

// replaying gives a new watch every value a key ever had, not only its
// current one.
type replaying struct {
	*publish.MemBackend
	mu       sync.Mutex
	history  map[string][][]byte
	replayed *atomic.Int64 // values sent that were no longer current
}

func (r *replaying) PutKey(ctx context.Context, key string, value []byte) error {
	r.mu.Lock()
	r.history[key] = append(r.history[key], slices.Clone(value))
	r.mu.Unlock()
	return r.MemBackend.PutKey(ctx, key, value)
}

func (r *replaying) WatchKeys(ctx context.Context, keys []string) (<-chan publish.KeyUpdate, error) {
	in, err := r.MemBackend.WatchKeys(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(chan publish.KeyUpdate)
	go func() {
		defer close(out)
		initial := true
		for u := range in {
			send := []publish.KeyUpdate{u}
			if initial && !u.Initial && !u.Deleted {
				r.mu.Lock()
				send = send[:0]
				for _, v := range r.history[u.Key] {
					send = append(send, publish.KeyUpdate{Key: u.Key, Value: v})
				}
				r.replayed.Add(int64(max(len(send)-1, 0)))
				r.mu.Unlock()
			}
			initial = initial && !u.Initial
			for _, s := range send {
				select {
				case out <- s:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// TestTheSuiteHoldsOverAReplayingBackend: LateReader's rule (a late
// watch delivers the newest version, not the history) is Watch's, kept
// above any backend: over one that replays every value a key had, the
// whole suite passes. (So no broken backend fails LateReader alone.)
func TestTheSuiteHoldsOverAReplayingBackend(t *testing.T) {
	var replayed atomic.Int64
	publishtest.Run(t, publishtest.Harness{Golden: "../../snapshot/testdata/golden.skpca", New: func(t *testing.T) func(bool) publish.Backend {
		b := &replaying{MemBackend: publish.NewMemBackend(), history: map[string][][]byte{}, replayed: &replayed}
		return func(bool) publish.Backend { return b }
	}})
	if replayed.Load() == 0 {
		t.Fatal("no watch was given an old value: the suite did not meet a replaying backend")
	}
	t.Logf("%d old values replayed to watches", replayed.Load())
}

// TestTheSuiteCanFail: a backend that breaks one promise of
// publish.Backend fails the subtests of the rules built on it, and
// passes the others.
func TestTheSuiteCanFail(t *testing.T) {
	broken := map[string]func(*publish.MemBackend) publish.Backend{
		"no-cas":     func(b *publish.MemBackend) publish.Backend { return noCAS{b} },
		"hoarding":   func(b *publish.MemBackend) publish.Backend { return hoarding{b} },
		"amnesic":    func(b *publish.MemBackend) publish.Backend { return amnesic{noCAS{b}} },
		"unlisted":   func(b *publish.MemBackend) publish.Backend { return unlisted{b} },
		"partial":    func(b *publish.MemBackend) publish.Backend { return partial{b} },
		"one-read":   func(b *publish.MemBackend) publish.Backend { return oneRead{b} },
		"short-get":  func(b *publish.MemBackend) publish.Backend { return shortGet{b} },
		"nameless":   func(b *publish.MemBackend) publish.Backend { return nameless{b} },
		"stale-rev":  func(b *publish.MemBackend) publish.Backend { return staleRevision{b} },
		"keeping":    func(b *publish.MemBackend) publish.Backend { return keeping{b} },
		"phantom":    func(b *publish.MemBackend) publish.Backend { return phantom{b} },
		"unspecific": func(b *publish.MemBackend) publish.Backend { return unspecific{b} },
	}
	for name, wrap := range broken {
		if testkit.InChild("PUBLISHTEST_BROKEN=" + name) {
			publishtest.Run(t, publishtest.Harness{Golden: "../../snapshot/testdata/golden.skpca", New: func(t *testing.T) func(bool) publish.Backend {
				b := wrap(publish.NewMemBackend())
				return func(bool) publish.Backend { return b }
			}})
			return
		}
	}
	all := []string{"Reset", "PoisonedPointer", "Pins", "LateReader", "SwapKey", "Lease", "Objects"}
	for name, fails := range map[string][]string{
		// The lease's sequential rule (a second owner refused while the
		// first renews) holds without the compare; the compare decides a
		// race of two owners, which publish's TestLeaseRaceOneWinner runs.
		"no-cas": {"SwapKey"},
		// Pruning: the store keeps what it should have dropped.
		"hoarding": {"Reset", "Pins"},
		"amnesic":  {"SwapKey", "Lease"},
		"unlisted": {"Reset", "PoisonedPointer", "Pins", "Lease", "Objects"},
		// The publisher hands a put the whole version in one read; the
		// suite's own puts come in pieces, or fail part way.
		"partial":  {"Objects"},
		"one-read": {"Objects"},
		// The golden version is 760 bytes: only the suite's own objects
		// are longer than 64 KiB.
		"short-get": {"Objects"},
		// What the store lists is matched to a model by its metadata.
		"nameless": {"Reset", "PoisonedPointer", "Pins", "Lease", "Objects"},
		// A lease renewed at a stale revision would be lost at its next
		// renewal; the suite's Lease ends before one.
		"stale-rev": {"SwapKey"},
		"keeping":   {"Objects"},
		// A version whose object is gone fails to decode all the same:
		// only the suite's own get of a missing name sees the difference.
		"phantom": {"Objects"},
		// PinnedVersion takes a pin key that is not set for an error.
		"unspecific": {"Pins"},
	} {
		testkit.ChildFails(t, "PUBLISHTEST_BROKEN="+name, all, fails)
	}
}
