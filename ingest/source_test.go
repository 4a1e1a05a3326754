package ingest_test

import (
	"context"
	"testing"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/ingest/sourcetest"
)

func TestMemSourceConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, topic string) (ingest.Source, func(int, ...[]byte)) {
		s := ingest.NewMemSource(topic, 8)
		return s, func(p int, v ...[]byte) { s.Produce(p, v...) }
	})
}

// The memory source keeps commits per partition of its own topic only,
// says -1 for a partition never committed, and refuses commits once
// closed.
func TestMemSourceCommits(t *testing.T) {
	s := ingest.NewMemSource("t", 4)
	if got := s.Committed(0); got != -1 {
		t.Errorf("never committed: %d, want -1", got)
	}
	if err := s.Commit(context.Background(), map[string]map[int]int64{"t": {0: 5, 2: 7}, "other": {1: 9}}); err != nil {
		t.Fatal(err)
	}
	if s.Committed(0) != 5 || s.Committed(2) != 7 || s.Committed(1) != -1 {
		t.Errorf("committed %d, %d, %d; want 5, 7, -1 (another topic's offsets are not this source's)", s.Committed(0), s.Committed(2), s.Committed(1))
	}
	s.Close()
	if err := s.Commit(context.Background(), map[string]map[int]int64{"t": {0: 6}}); err == nil || s.Committed(0) != 5 {
		t.Errorf("a commit after Close: %v, offset %d", err, s.Committed(0))
	}
}
