package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// dirBytes is the total size of the files in dir.
func dirBytes(t *testing.T, dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += int(fi.Size())
		}
	}
	return n
}

// Defect: old snapshots were pruned only after a successful write, so once
// Keep+1 no longer fitted every write failed, without end. A store on a
// disk that holds Keep snapshots and a half now keeps writing.
func TestStoreFullDiskRecovers(t *testing.T) {
	dir := t.TempDir()
	snap := sample()
	data, err := snap.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	const keep = 3
	quota := keep*len(data) + len(data)/2
	s := &Store{Dir: dir, Model: "m", Keep: keep}
	s.write = func(path string, b []byte) error {
		if dirBytes(t, dir)+len(b) > quota {
			return fmt.Errorf("write %s: %w", path, syscall.ENOSPC)
		}
		return writeAtomic(path, b)
	}
	for i := range 20 {
		snap.Header.Step = uint64(i + 1)
		if _, _, err := s.Save(snap); err != nil {
			t.Fatalf("save %d: %v", i+1, err)
		}
	}
	vs, _ := s.versions()
	if len(vs) != keep || vs[0] != 20 {
		t.Errorf("versions %v, want the newest %d ending at 20", vs, keep)
	}
	// A disk that fills up by other means: only the newest snapshot and
	// the new one fit; Save makes room and recovers.
	quota = 2*len(data) + len(data)/2
	snap.Header.Step = 21
	if _, _, err := s.Save(snap); err != nil {
		t.Fatalf("save on a fuller disk: %v", err)
	}
	if got, _, err := s.Latest(); err != nil || got.Header.Step != 21 {
		t.Fatalf("latest after recovery: %v", err)
	}
}

// Defect: a crash mid-write (SIGKILL) left temporary files that nothing
// removed.
func TestStoreCleanRemovesTempFiles(t *testing.T) {
	dir := t.TempDir()
	s := &Store{Dir: dir, Model: "m"}
	snap := sample()
	if _, _, err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".tmp-123" + Ext, ".tmp-abc" + Ext} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keepMe := filepath.Join(dir, "notes.txt")
	os.WriteFile(keepMe, []byte("x"), 0o644)
	if err := s.Clean(); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
	if _, err := os.Stat(keepMe); err != nil {
		t.Error("Clean removed a file that is not its own")
	}
	if _, _, err := s.Latest(); err != nil {
		t.Errorf("Clean broke the store: %v", err)
	}
}

// Defect: a checksum-valid snapshot with NaN coefficients was restored
// and served (HTTP 200 with an empty body, NATS never replied). It is
// refused when decoding, and never written.
func TestNonFiniteRefused(t *testing.T) {
	snap := sample()
	snap.Coef[0][5] = math.NaN()
	if _, err := snap.MarshalBinary(); !errors.Is(err, ErrNonFinite) {
		t.Errorf("MarshalBinary of a NaN coefficient: %v, want ErrNonFinite", err)
	}
	snap = sample()
	snap.Header.Views[0].Center[1] = math.Inf(1)
	if _, err := snap.MarshalBinary(); !errors.Is(err, ErrNonFinite) {
		t.Errorf("MarshalBinary of an infinite centre: %v, want ErrNonFinite", err)
	}
	// A file written by something else: valid layout and checksum, NaN
	// inside.
	data, err := sample().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	hlen := int(binary.LittleEndian.Uint32(data[12:]))
	binary.LittleEndian.PutUint64(data[24+hlen+8*3:], math.Float64bits(math.NaN()))
	body := len(data) - 4
	binary.LittleEndian.PutUint32(data[body:], crc32.Checksum(data[:body], castagnoli))
	if _, err := Decode(data); !errors.Is(err, ErrNonFinite) {
		t.Errorf("Decode of a NaN coefficient: %v, want ErrNonFinite", err)
	}
}

// TestStoreLock: a second holder of a store's lock is refused with
// ErrLocked naming the first holder's process; after Release it can be
// taken again.
func TestStoreLock(t *testing.T) {
	st := &Store{Dir: filepath.Join(t.TempDir(), "snaps"), Model: "m"}
	l1, err := st.Lock()
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&Store{Dir: st.Dir, Model: "m"}).Lock()
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrLocked naming process %d", err, os.Getpid())
	}
	if err := l1.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := st.Lock()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
}

// Defect: retention keeps the highest versions, and a Save whose version
// was below the others' (a new model started beside a damaged file of a
// higher version) removed the snapshot it had just written: with keep 1
// every snapshot of the new model was deleted as it was saved. The
// snapshot a Save writes now stays; the others are pruned around it.
func TestStoreKeepsTheSnapshotItSaves(t *testing.T) {
	dir := t.TempDir()
	s := &Store{Dir: dir, Model: "m", Keep: 1}
	if err := os.WriteFile(s.Path(1000), []byte("SKPCASNP damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := sample()
	for step := uint64(1); step <= 3; step++ {
		snap.Header.Step = step
		if _, _, err := s.Save(snap); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.Latest()
		if err != nil || got.Header.Step != step {
			t.Fatalf("after saving step %d: latest %v (%v)", step, got, err)
		}
	}
	if vs, _ := s.versions(); len(vs) != 1 || vs[0] != 3 {
		t.Errorf("versions %v, want [3]", vs)
	}
	s.Keep = 3
	for step := uint64(4); step <= 6; step++ {
		snap.Header.Step = step
		if _, _, err := s.Save(snap); err != nil {
			t.Fatal(err)
		}
	}
	if vs, _ := s.versions(); len(vs) != 3 || vs[0] != 6 || vs[2] != 4 {
		t.Errorf("versions %v, want [6 5 4]", vs)
	}
	// After a restart (a new Store) beside a damaged file of a higher
	// version, the snapshot restored from stays until the next one is
	// durable, even when that write fails.
	if err := os.WriteFile(s.Path(1000), []byte("SKPCASNP damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Store{Dir: dir, Model: "m", Keep: 1, write: func(string, []byte) error { return syscall.ENOSPC }}
	if got, _, err := r.Latest(); err != nil || got.Header.Step != 6 {
		t.Fatalf("restart: latest %v (%v)", got, err)
	}
	snap.Header.Step = 7
	if _, _, err := r.Save(snap); err == nil {
		t.Fatal("a failed write reported saved")
	}
	if got, _, err := r.Latest(); err != nil || got.Header.Step != 6 {
		t.Errorf("after a failed write: latest %v (%v), want step 6 kept", got, err)
	}
}
