package ingest

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// byteQueue hands fetched messages to the learner, bounded both in count
// (the channel's capacity) and in bytes of values (a weighted semaphore
// held from put until the reader takes the message from out).
type byteQueue struct {
	in     chan queued
	out    chan Message // unbuffered: a message on it has been taken
	bytes  *semaphore.Weighted
	limit  int64
	queued atomic.Int64
	held   atomic.Int64 // bytes of the queued messages, as counted against limit
}

type queued struct {
	m Message
	n int64
}

func newByteQueue(count int, bytes int64) *byteQueue {
	return &byteQueue{in: make(chan queued, count), out: make(chan Message), bytes: semaphore.NewWeighted(bytes), limit: bytes}
}

// put waits for room and queues m.
func (q *byteQueue) put(ctx context.Context, m Message) error {
	n := min(int64(len(m.Value)), q.limit) // a message beyond the limit passes alone
	if err := q.bytes.Acquire(ctx, n); err != nil {
		return err
	}
	select {
	case q.in <- queued{m, n}:
		q.held.Add(n)
		q.queued.Add(1)
		return nil
	case <-ctx.Done():
		q.bytes.Release(n)
		return ctx.Err()
	}
}

// forward moves queued messages to out until ctx is done, releasing their
// bytes once the reader has taken them.
func (q *byteQueue) forward(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-q.in:
			select {
			case q.out <- it.m:
				q.queued.Add(-1)
				q.held.Add(-it.n)
				q.bytes.Release(it.n)
			case <-ctx.Done():
				return
			}
		}
	}
}

// len is the number of queued messages (taken ones excluded).
func (q *byteQueue) len() int64 { return q.queued.Load() }

// heldBytes is the bytes of the queued messages as counted against the
// bound (a message larger than the bound counts as the bound): never more
// than QueueBytes.
func (q *byteQueue) heldBytes() int64 { return q.held.Load() }
