package ingest

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// byteQueue hands fetched messages to the learner, bounded both in count
// (the channel's capacity) and in bytes of values (a weighted semaphore
// held from put until the reader takes the message with take).
type byteQueue struct {
	in     chan queued
	bytes  *semaphore.Weighted
	limit  int64
	queued atomic.Int64
	held   atomic.Int64 // bytes of the queued messages, as counted against limit
	next   *queued      // taken from in, of a later generation than the last take's (one reader)
}

type queued struct {
	m      Message
	n      int64
	gen    int32 // the group generation it was read in
	rewind bool  // the first message read again below the model's offset (Batch.Rewound)
}

func newByteQueue(count int, bytes int64) *byteQueue {
	return &byteQueue{in: make(chan queued, count), bytes: semaphore.NewWeighted(bytes), limit: bytes}
}

// put waits for room and queues m, read in generation gen; rewind marks
// the first message of a partition read again from an offset below the
// model's (Batch.Rewound).
func (q *byteQueue) put(ctx context.Context, m Message, gen int32, rewind bool) error {
	n := min(int64(len(m.Value)), q.limit) // a message beyond the limit passes alone
	if err := q.bytes.Acquire(ctx, n); err != nil {
		return err
	}
	q.held.Add(n)
	q.queued.Add(1)
	select {
	case q.in <- queued{m, n, gen, rewind}:
		return nil
	case <-ctx.Done():
		q.held.Add(-n)
		q.queued.Add(-1)
		q.bytes.Release(n)
		return ctx.Err()
	}
}

// take waits for a queued message (or ctx) and returns it with the
// messages queued behind it of the same generation, at most max in all,
// in queue order, releasing their bytes: they are the reader's now, and
// whether the first is marked rewind. A message of another generation,
// or marked rewind, stays first in line for the next take.
func (q *byteQueue) take(ctx context.Context, max int) ([]Message, int32, bool, error) {
	var it queued
	if q.next != nil {
		it, q.next = *q.next, nil
	} else {
		select {
		case it = <-q.in:
		case <-ctx.Done():
			return nil, 0, false, ctx.Err()
		}
	}
	gen, rewind := it.gen, it.rewind
	out := []Message{it.m}
	n := it.n
	for len(out) < max {
		select {
		case it = <-q.in:
			if it.gen != gen || it.rewind {
				q.next = &it
				break
			}
			out = append(out, it.m)
			n += it.n
			continue
		default:
		}
		break
	}
	q.queued.Add(-int64(len(out)))
	q.held.Add(-n)
	q.bytes.Release(n)
	return out, gen, rewind, nil
}

// len is the number of queued messages (taken ones excluded).
func (q *byteQueue) len() int64 { return q.queued.Load() }

// heldBytes is the bytes of the queued messages as counted against the
// bound (a message larger than the bound counts as the bound): never more
// than QueueBytes.
func (q *byteQueue) heldBytes() int64 { return q.held.Load() }
