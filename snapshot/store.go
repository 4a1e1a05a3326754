package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Ext is the file extension of snapshot files.
const Ext = ".skpca"

// ErrNoSnapshot is returned by Latest when the store holds no valid snapshot.
var ErrNoSnapshot = errors.New("snapshot: no valid snapshot in store")

// Store is a directory of snapshots of one model, named
// <model>-<version, 20 digits>.skpca so that names sort by version.
type Store struct {
	// Dir is the directory. It is created on first write.
	Dir string
	// Model is the model name used in file names.
	Model string
	// Keep is how many snapshots to retain. Default: 5.
	Keep int
	// OnSkip, if set, is told about every file Latest skips as invalid.
	OnSkip func(path string, err error)

	// saved is the version this store saved last, or the one Latest
	// returned before the first Save (0: none).
	saved uint64
	// write replaces writeAtomic in tests (a full disk).
	write func(path string, data []byte) error
}

func (s *Store) keep() int {
	if s.Keep <= 0 {
		return 5
	}
	return s.Keep
}

// Path returns the file path of a version.
func (s *Store) Path(version uint64) string {
	return filepath.Join(s.Dir, fmt.Sprintf("%s-%020d%s", s.Model, version, Ext))
}

// Save writes snap atomically (temp file, fsync, rename, fsync directory)
// and keeps the newest Keep snapshots. It makes room first: the oldest
// snapshots beyond Keep−1 are removed before the write, so a disk that
// holds Keep snapshots never fills; if the write still fails, all but the
// newest snapshot are removed and the write is tried once more, so a full
// disk recovers by itself as long as one snapshot fits next to the
// newest. The snapshot this store saved last is never removed before the
// new one is durable, and the new one never by its own Save, even when
// files of higher versions (damaged ones) are in the directory. It
// returns the path and the encoded bytes.
func (s *Store) Save(snap *Snapshot) (string, []byte, error) {
	data, err := snap.MarshalBinary()
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("snapshot: create store directory: %w", err)
	}
	write := s.write
	if write == nil {
		write = writeAtomic
	}
	v := snap.Header.Version()
	path := s.Path(v)
	// Retention keeps the highest versions, but never the snapshot this
	// store saved last (before the new one is durable) nor the new one:
	// a damaged file of a higher version must not push them out.
	pruneErr := s.pruneTo(max(s.keep()-1, 1), s.saved)
	if err := write(path, data); err != nil {
		if perr := s.pruneTo(1, s.saved); perr != nil {
			return "", nil, errors.Join(err, perr)
		}
		if err2 := write(path, data); err2 != nil {
			return "", nil, fmt.Errorf("%w (and again after removing all but the newest snapshot)", err)
		}
	}
	s.saved = v
	if err := errors.Join(pruneErr, s.pruneTo(s.keep(), v)); err != nil {
		return path, data, err
	}
	return path, data, nil
}

// MoveAside moves every stored version of the model into the
// subdirectory sub of Dir (created), so that a new model started in Dir
// (a new incarnation, versions from 1 again) is not pruned by the
// retention, which keeps the highest versions. It returns how many it
// moved. Hold the directory's lock.
func (s *Store) MoveAside(sub string) (int, error) {
	vs, err := s.versions()
	if err != nil {
		return 0, err
	}
	dst := filepath.Join(s.Dir, sub)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, fmt.Errorf("snapshot: make %s: %w", dst, err)
	}
	moved := 0
	for _, v := range vs {
		from := s.Path(v)
		if err := os.Rename(from, filepath.Join(dst, filepath.Base(from))); err != nil {
			return moved, fmt.Errorf("snapshot: move %s aside: %w", from, err)
		}
		moved++
	}
	if d, err := os.Open(s.Dir); err == nil {
		d.Sync()
		d.Close()
	}
	return moved, nil
}

// Clean removes temporary files a crash left mid-write (".tmp-*" + Ext).
// Call it at start-up, before any Save.
func (s *Store) Clean() error {
	tmps, err := filepath.Glob(filepath.Join(s.Dir, ".tmp-*"+Ext))
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tmps {
		if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("snapshot: remove leftover %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-*"+Ext)
	if err != nil {
		return fmt.Errorf("snapshot: create temp file in %s: %w", dir, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("snapshot: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("snapshot: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("snapshot: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("snapshot: rename into %s: %w", path, err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Versions lists the store's snapshot versions, newest first (valid or
// not: Load tells).
func (s *Store) Versions() ([]uint64, error) { return s.versions() }

// versions lists the store's snapshot versions, newest first.
func (s *Store) versions() ([]uint64, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil // nothing can be stored there yet; Save reports why
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: list store: %w", err)
	}
	prefix := s.Model + "-"
	var vs []uint64
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, Ext) {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, prefix), Ext), 10, 64)
		if err != nil {
			continue
		}
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] > vs[j] })
	return vs, nil
}

// pruneTo removes all but n snapshots: protect, when the store holds it
// (0: none), and the highest other versions.
func (s *Store) pruneTo(n int, protect uint64) error {
	vs, err := s.versions()
	if err != nil {
		return err
	}
	if protect != 0 && slices.Contains(vs, protect) {
		n-- // protect is kept beside the n − 1 highest others
	} else {
		protect = 0
	}
	var errs []error
	for _, v := range vs {
		if v == protect {
			continue
		}
		if n > 0 {
			n--
			continue
		}
		if err := os.Remove(s.Path(v)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Latest returns the newest snapshot that decodes and validates, with its
// encoded bytes, skipping (and reporting to OnSkip) corrupt or truncated
// files. It returns ErrNoSnapshot when none is valid.
func (s *Store) Latest() (*Snapshot, []byte, error) {
	vs, err := s.versions()
	if err != nil {
		return nil, nil, err
	}
	for _, v := range vs {
		p := s.Path(v)
		snap, data, err := Load(p)
		if err != nil {
			if s.OnSkip != nil {
				s.OnSkip(p, err)
			}
			continue
		}
		if s.saved == 0 {
			s.saved = v // the snapshot a restart continues from: kept until the next is durable
		}
		return snap, data, nil
	}
	return nil, nil, ErrNoSnapshot
}

// Load reads and decodes one snapshot file.
func Load(path string) (*Snapshot, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: read %s: %w", path, err)
	}
	var snap Snapshot
	if err := snap.UnmarshalBinary(data); err != nil {
		return nil, nil, fmt.Errorf("snapshot: %s: %w", path, err)
	}
	return &snap, data, nil
}

// Decode decodes a snapshot from bytes.
func Decode(data []byte) (*Snapshot, error) {
	var snap Snapshot
	if err := snap.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	return &snap, nil
}

// WriteFile encodes snap and writes it to path atomically (a temporary
// file in the same directory, fsynced, then renamed): a reader never sees
// a half-written model, and a crash leaves the old file or none.
func WriteFile(path string, snap *Snapshot) ([]byte, error) {
	data, err := snap.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return data, writeAtomic(path, data)
}
