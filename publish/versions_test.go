package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
