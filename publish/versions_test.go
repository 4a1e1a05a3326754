package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// The versions of a store: newest first, each with the size and SHA-256
// of its file's bytes (the golden model holds no learner state, so its
// published form is the file); a corrupt file is passed over by List and
// an error of Load, never a panic; a version never stored is
// ErrNoVersion, whose message does not name the server's directory.
func TestStoreVersionsListAndLoad(t *testing.T) {
	store := testkit.GoldenStore(t, 1, 2, 3)
	if err := os.WriteFile(store.Path(9), []byte("SKPCASNP but not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	vs := NewStoreVersions(store)
	list, err := vs.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, v := range list {
		got = append(got, v.Version)
		b, err := os.ReadFile(store.Path(v.Version))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if v.Size != len(b) || v.SHA256 != hex.EncodeToString(sum[:]) || v.Features == 0 {
			t.Errorf("version %d: size %d, sha256 %s…, features %d; the file has %d bytes, sha256 %x…", v.Version, v.Size, v.SHA256[:8], v.Features, len(b), sum[:4])
		}
	}
	if !slices.Equal(got, []uint64{3, 2, 1}) {
		t.Errorf("listed %v, want [3 2 1] (the corrupt version 9 passed over)", got)
	}
	m, data, err := vs.Load(2)
	if err != nil || m.Header().Version() != 2 {
		t.Fatalf("load 2: %v", err)
	}
	if b, _ := os.ReadFile(store.Path(2)); !slices.Equal(b, data) {
		t.Error("version 2's bytes are not its file's")
	}
	if _, _, err := vs.Load(9); err == nil {
		t.Error("the corrupt version 9 loaded")
	}
	_, _, err = vs.Load(7)
	if !errors.Is(err, ErrNoVersion) || strings.Contains(err.Error(), filepath.Base(store.Dir)) {
		t.Errorf("version 7: %v, want ErrNoVersion without the directory", err)
	}
	// Loaded versions are kept, at most versionCacheN, the least
	// recently used leaving first.
	for _, v := range []uint64{1, 2, 3, 1} {
		if _, _, err := vs.Load(v); err != nil {
			t.Fatal(err)
		}
	}
	var cached []uint64
	for _, c := range vs.cache {
		cached = append(cached, c.v)
	}
	if !slices.Equal(cached, []uint64{2, 3, 1}) {
		t.Errorf("cache %v, want [2 3 1] (least recently used first)", cached)
	}
	if err := os.Remove(store.Path(9)); err != nil {
		t.Fatal(err)
	}
	store.Keep = 1
	s, _ := testkit.Golden(t, 4)
	if _, _, err := store.Save(s); err != nil {
		t.Fatal(err)
	}
	if list, _ := vs.List(); len(list) != 1 || list[0].Version != 4 {
		t.Errorf("after pruning to one: %v", list)
	}
}

// Defect (issue 58, item 13): every download held its own copy of a
// version for as long as a slow reader took (up to the server's 60 s
// write timeout), with no bound: 40 readers cycling 5 versions through
// the 4-entry cache took the service from 351 to 971 MiB and a 1 GiB
// container was OOM-killed. Now the versions requests hold are bounded
// in bytes (HoldBytes): 12 readers that never finish, each on one of 5
// versions, hold at most HoldBytes between them; the others wait (and
// give up with their context), and a release lets the next in.
func TestHeldVersionsAreBoundedInBytes(t *testing.T) {
	store := testkit.GoldenStore(t, 1, 2, 3, 4, 5)
	st, err := os.Stat(store.Path(1))
	if err != nil {
		t.Fatal(err)
	}
	vs := NewStoreVersions(store)
	vs.HoldBytes = 2*st.Size() + st.Size()/2 // room for two at once
	var (
		mu       sync.Mutex
		holding  int
		most     int
		releases []func()
		refused  int
	)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, _, release, err := vs.Hold(ctx, uint64(1+i%5))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			holding++
			most = max(most, holding)
			releases = append(releases, release)
		})
	}
	wg.Wait()
	if most != 2 || refused != 10 {
		t.Fatalf("%d versions held at once, %d requests refused; want 2 held (HoldBytes) and 10 refused", most, refused)
	}
	releases[0]()
	releases[0]() // twice: once counts
	if _, _, _, err := vs.Hold(context.Background(), 3); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, _, err := vs.Hold(ctx, 4); err == nil {
		t.Error("a third version held while two are: the bound lets too much in")
	}
}
