package ingest

import (
	"context"
	"errors"
	"sync"
)

// Source is where the service's messages come from: a Kafka consumer group
// (Consumer) or, in tests, memory (MemSource). Both pass the same
// conformance suite (ingest/sourcetest).
//
// Run fetches in the background until ctx is done, starting every
// partition at the offset next gives, or at the source's start position
// for a partition next does not know. Fetch waits for at least one
// fetched message (or ctx) and returns the messages waiting, at most max,
// each partition's in offset order, with the offsets they cover. Commit
// records offsets (topic → partition → next offset) for tooling; the
// model's snapshot, not the commit, is the truth. Lag counts the messages
// not yet returned by Fetch: those behind the partition ends and those
// queued.
type Source interface {
	Run(ctx context.Context, next OffsetFunc) error
	Fetch(ctx context.Context, max int) (Batch, error)
	Commit(ctx context.Context, offsets map[string]map[int]int64) error
	Lag() int64
	Close() error
}

// Batch is what one Fetch returns: messages, and per partition the offset
// after the last of them (where the partition's next message starts).
type Batch struct {
	Messages []Message
	Next     map[int]int64
	// Generation is the consumer group generation the messages were read
	// in (one per batch; 0 from sources without generations).
	Generation int32
	// Rewound: the first message starts its partition's reads again
	// below the offset the model had (an OffsetGap of kind GapPastEnd
	// read from the first offset): the offsets before it no longer name
	// the same messages, and the reader takes them as new. Only a
	// batch's first message is ever so marked.
	Rewound bool
}

// newBatch returns the batch of msgs with its offsets.
func newBatch(msgs []Message) Batch {
	b := Batch{Messages: msgs, Next: map[int]int64{}}
	for _, m := range msgs {
		b.Next[m.Partition] = max(b.Next[m.Partition], m.Offset+1)
	}
	return b
}

var _ Source = (*Consumer)(nil)

// MemSource is an in-memory Source of one topic: Produce appends to a
// partition's log and Run replays the logs from the offsets the model
// asks for. It is safe for concurrent use.
type MemSource struct {
	Topic string

	mu        sync.Mutex
	logs      map[int][][]byte
	delivered map[int]int64
	committed map[int]int64
	wake      chan struct{}
	out       chan Message
	closed    bool
}

// NewMemSource returns an empty source for topic with a queue of queue
// messages between Run and the reader.
func NewMemSource(topic string, queue int) *MemSource {
	return &MemSource{Topic: topic, logs: map[int][][]byte{}, delivered: map[int]int64{}, committed: map[int]int64{},
		wake: make(chan struct{}, 1), out: make(chan Message, max(queue, 0))}
}

// Produce appends values to partition's log and returns the offset of the
// first.
func (s *MemSource) Produce(partition int, values ...[]byte) int64 {
	s.mu.Lock()
	first := int64(len(s.logs[partition]))
	for _, v := range values {
		s.logs[partition] = append(s.logs[partition], append([]byte(nil), v...))
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return first
}

// Fetch returns the messages Run has delivered, at most max, waiting for
// the first.
func (s *MemSource) Fetch(ctx context.Context, max int) (Batch, error) {
	var msgs []Message
	select {
	case m := <-s.out:
		msgs = append(msgs, m)
	case <-ctx.Done():
		return Batch{}, ctx.Err()
	}
	for len(msgs) < max {
		select {
		case m := <-s.out:
			msgs = append(msgs, m)
			continue
		default:
		}
		break
	}
	return newBatch(msgs), nil
}

// Run replays every partition from next (or from 0) and then follows new
// messages until ctx is done.
func (s *MemSource) Run(ctx context.Context, next OffsetFunc) error {
	s.mu.Lock()
	clear(s.delivered)
	s.mu.Unlock()
	for {
		m, ok := s.nextMessage(next)
		if !ok {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-s.wake:
			}
			continue
		}
		select {
		case s.out <- m:
			s.mu.Lock()
			s.delivered[m.Partition] = m.Offset + 1
			s.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// nextMessage returns the next message to deliver, if any. Partitions it
// has not started yet start where next says; next is called without the
// source's lock (the run loop answers it under its own, and asks Lag
// under that one).
func (s *MemSource) nextMessage(next OffsetFunc) (Message, bool) {
	s.mu.Lock()
	var fresh []int
	for p := range s.logs {
		if _, seen := s.delivered[p]; !seen {
			fresh = append(fresh, p)
		}
	}
	s.mu.Unlock()
	for _, p := range fresh {
		off, ok := next(s.Topic, p)
		if !ok {
			off = 0
		}
		s.mu.Lock()
		if _, seen := s.delivered[p]; !seen {
			s.delivered[p] = off
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, log := range s.logs {
		off, seen := s.delivered[p]
		if seen && off < int64(len(log)) {
			return Message{Topic: s.Topic, Partition: p, Offset: off, Value: log[off]}, true
		}
	}
	return Message{}, false
}

// Commit records offsets; Committed returns them.
func (s *MemSource) Commit(_ context.Context, offsets map[string]map[int]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("ingest: source closed")
	}
	for p, o := range offsets[s.Topic] {
		s.committed[p] = o
	}
	return nil
}

// Committed returns the last committed offset of partition (-1: none).
func (s *MemSource) Committed(partition int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.committed[partition]; ok {
		return o
	}
	return -1
}

// Lag counts messages not yet returned by Fetch.
func (s *MemSource) Lag() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for p, log := range s.logs {
		n += int64(len(log)) - s.delivered[p]
	}
	return n + int64(len(s.out))
}

// Close marks the source closed.
func (s *MemSource) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}
