package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
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
