package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLocked is returned (wrapped) by Store.Lock when another process
// holds the store's lock: two services writing one directory would
// interleave two lives of the model, and a restart would resume the other
// one's.
var ErrLocked = errors.New("snapshot: the snapshot directory is in use by another process")

// Lock is a held store lock (Store.Lock); Release gives it up.
type Lock struct{ f *os.File }

// LockPath is the lock file of a store: <dir>/<model>.lock.
func (s *Store) LockPath() string { return filepath.Join(s.Dir, s.Model+".lock") }

// Lock takes the store's lock, an exclusive advisory lock (flock) on
// LockPath, creating the directory if needed, and writes this process's
// id into the file. The lock is the process's until Release or its exit
// (a killed process's lock goes with it). Another holder: ErrLocked,
// naming the file and the holder's process id.
func (s *Store) Lock() (*Lock, error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot: lock: %w", err)
	}
	path := s.LockPath()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("snapshot: lock: %w", err)
	}
	if err := flock(f); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w: %s is held by process %s; give each service its own snapshot.dir (or stop the other one)",
				ErrLocked, path, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("snapshot: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up (nil: nothing to release).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := funlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
