package ingest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

// Spill is a bounded, durable file of dead letters the dead-letter topic
// did not take: the queue appends a batch here when its write fails and
// there is room, so learning and snapshots go on while the topic refuses
// writes, and sends the file's records to the topic again until it takes
// them (Drain). It survives restarts: a spill left by an earlier run is
// sent first. One JSON record a line; at-least-once, as dead-lettering is
// (a drain cut short sends its records again).
type Spill struct {
	path  string
	limit int64

	mu    sync.Mutex
	bytes int64 // the file's size
	count int64 // its records
}

// DefaultSpillBytes bounds a spill file (kafka.dead_letter_spill_bytes).
const DefaultSpillBytes = 64 << 20

// OpenSpill opens (or finds empty) the spill file at path, at most limit
// bytes, counting the records an earlier run left in it.
func OpenSpill(path string, limit int64) (*Spill, error) {
	s := &Spill{path: path, limit: max(limit, 1)}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// No spill yet (or no directory yet: appends fail until there
		// is one, and the queue retries as without a spill).
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: dead-letter spill %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		s.count++
		s.bytes += int64(len(sc.Bytes()) + 1)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ingest: dead-letter spill %s: %w", path, err)
	}
	return s, nil
}

// Len returns the records in the spill and their bytes (0, 0 for a nil
// Spill).
func (s *Spill) Len() (records, bytes int64) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.bytes
}

// Path is the spill file's path.
func (s *Spill) Path() string {
	if s == nil {
		return ""
	}
	return s.path
}

// spillRecord is a dead letter as the spill file holds it.
type spillRecord struct {
	Topic     string         `json:"topic"`
	Partition int            `json:"partition"`
	Offset    int64          `json:"offset"`
	Time      time.Time      `json:"time"`
	Key       []byte         `json:"key,omitempty"`
	Value     []byte         `json:"value"`
	Headers   []kafka.Header `json:"headers,omitempty"`
	Reason    string         `json:"reason"`
	Error     string         `json:"error"`
}

// Append adds recs to the file, synced, and reports whether there was
// room: false (nothing written) when they would take the file beyond
// its bound.
func (s *Spill) Append(recs []DeadLetterRecord) (bool, error) {
	var buf []byte
	for _, r := range recs {
		sr := spillRecord{Topic: r.Msg.Topic, Partition: r.Msg.Partition, Offset: r.Msg.Offset, Time: r.Msg.Time, Key: r.Msg.Key, Value: r.Msg.Value,
			Headers: r.Msg.Headers, Reason: r.Reason, Error: r.Error}
		line, err := json.Marshal(sr)
		if err != nil {
			return false, err
		}
		buf = append(append(buf, line...), '\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+int64(len(buf)) > s.limit {
		return false, nil
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return false, fmt.Errorf("ingest: dead-letter spill: %w", err)
	}
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A partial line is cut off by the next Drain's rewrite; the
		// records were not spilled.
		return false, fmt.Errorf("ingest: dead-letter spill: %w", err)
	}
	s.bytes += int64(len(buf))
	s.count += int64(len(recs))
	return true, nil
}

// read returns the file's records (a cut-off last line is dropped).
func (s *Spill) read() ([]DeadLetterRecord, error) {
	f, err := os.Open(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []DeadLetterRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		var sr spillRecord
		if json.Unmarshal(sc.Bytes(), &sr) != nil {
			continue
		}
		m := Message{Topic: sr.Topic, Partition: sr.Partition, Offset: sr.Offset, Time: sr.Time, Key: sr.Key, Value: sr.Value, Headers: sr.Headers}
		out = append(out, DeadLetterRecord{Msg: m, Reason: sr.Reason, Error: sr.Error})
	}
	return out, sc.Err()
}

// Drain writes the spill's records to w in batches of DeadLetterBatch,
// each bounded by DeadLetterTimeout, and removes what w took: the file
// is emptied when all were, else rewritten with the rest (then the error).
func (s *Spill) Drain(ctx context.Context, w DeadLetterWriter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.read()
	if err != nil {
		return fmt.Errorf("ingest: dead-letter spill %s: %w", s.path, err)
	}
	done := 0
	for done < len(recs) {
		end := min(done+DeadLetterBatch, len(recs))
		wctx, cancel := context.WithTimeout(ctx, DeadLetterTimeout)
		err = w.Write(wctx, recs[done:end])
		cancel()
		if err != nil {
			break
		}
		done = end
	}
	if done == 0 && err != nil {
		return err
	}
	if rerr := s.rewrite(recs[done:]); rerr != nil {
		return rerr
	}
	return err
}

// rewrite replaces the file with recs (removes it when there are none),
// atomically; the caller holds s.mu.
func (s *Spill) rewrite(recs []DeadLetterRecord) error {
	if len(recs) == 0 {
		s.count, s.bytes = 0, 0
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("ingest: dead-letter spill: %w", err)
		}
		return nil
	}
	tmp := filepath.Join(filepath.Dir(s.path), ".tmp-"+filepath.Base(s.path))
	os.Remove(tmp)
	rest := &Spill{path: tmp, limit: 1 << 62}
	if _, err := rest.Append(recs); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("ingest: dead-letter spill: %w", err)
	}
	s.count, s.bytes = rest.count, rest.bytes
	return nil
}
