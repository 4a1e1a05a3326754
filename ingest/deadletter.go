package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/semaphore"
)

// DeadLetterRecord is one refused message and why.
type DeadLetterRecord struct {
	Msg    Message
	Reason string
	Error  string
}

// DeadLetterWriter writes refused messages somewhere durable: a Kafka
// topic (DeadLetter) or, in tests, memory (MemDeadLetter). Write returns
// once every record is stored, or an error if any was not.
type DeadLetterWriter interface {
	Write(ctx context.Context, recs []DeadLetterRecord) error
	Close() error
}

// DeadLetter writes refused messages to a Kafka topic with their reason.
type DeadLetter struct {
	w        *kafka.Writer
	tr       *kafka.Transport
	maxBytes int
}

// DefaultDeadLetterMaxBytes is the largest dead-letter message written
// whole: the broker default message.max.bytes (1 MiB) less room for the
// headers. Larger values are truncated (see DeadLetterMessage).
const DefaultDeadLetterMaxBytes = 1<<20 - 16<<10

// NewDeadLetter returns a writer to topic.
func NewDeadLetter(cfg ConsumerConfig, topic string) (*DeadLetter, error) {
	tr, err := cfg.Transport()
	if err != nil {
		return nil, err
	}
	return &DeadLetter{tr: tr, maxBytes: DefaultDeadLetterMaxBytes, w: &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...), Topic: topic, Transport: tr,
		RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: true,
		BatchTimeout: 10 * time.Millisecond, MaxAttempts: 10, BatchSize: 1000,
	}}, nil
}

// DeadLetterMessage is the Kafka message for rec: the original key and
// value with headers reason, error, source-topic, source-partition and
// source-offset, and the same as Kafka Connect names them
// (__connect.errors.topic, .partition, .offset, .exception.class.name —
// "streamkpca.ingest.BadMessageError.<reason>" — and .exception.message). A value longer than maxBytes is cut to maxBytes and the
// headers truncated=true, original-size and original-sha256 (hex) say so,
// so that a message near the broker's size limit still reaches the
// dead-letter topic.
func DeadLetterMessage(rec DeadLetterRecord, maxBytes int) kafka.Message {
	m := rec.Msg
	h := []kafka.Header{
		{Key: "reason", Value: []byte(rec.Reason)},
		{Key: "error", Value: []byte(truncate(rec.Error, 1024))},
		{Key: "source-topic", Value: []byte(m.Topic)},
		{Key: "source-partition", Value: []byte(strconv.Itoa(m.Partition))},
		{Key: "source-offset", Value: []byte(strconv.FormatInt(m.Offset, 10))},
		// The same in Kafka Connect's dead-letter convention, for the
		// tools that read it (DeadLetterQueueReporter's names).
		{Key: "__connect.errors.topic", Value: []byte(m.Topic)},
		{Key: "__connect.errors.partition", Value: []byte(strconv.Itoa(m.Partition))},
		{Key: "__connect.errors.offset", Value: []byte(strconv.FormatInt(m.Offset, 10))},
		{Key: "__connect.errors.exception.class.name", Value: []byte("streamkpca.ingest.BadMessageError." + rec.Reason)},
		{Key: "__connect.errors.exception.message", Value: []byte(truncate(rec.Error, 1024))},
	}
	key, value := m.Key, m.Value
	if len(key) > 1024 {
		key = key[:1024]
	}
	if len(value) > maxBytes {
		sum := sha256.Sum256(value)
		h = append(h,
			kafka.Header{Key: "truncated", Value: []byte("true")},
			kafka.Header{Key: "original-size", Value: []byte(strconv.Itoa(len(value)))},
			kafka.Header{Key: "original-sha256", Value: []byte(hex.EncodeToString(sum[:]))})
		value = value[:maxBytes]
	}
	return kafka.Message{Key: key, Value: value, Headers: h}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Write writes recs in one batch.
func (d *DeadLetter) Write(ctx context.Context, recs []DeadLetterRecord) error {
	ms := make([]kafka.Message, len(recs))
	for i, r := range recs {
		ms[i] = DeadLetterMessage(r, d.maxBytes)
	}
	if err := d.w.WriteMessages(ctx, ms...); err != nil {
		return fmt.Errorf("ingest: dead-letter write of %d messages: %w", len(recs), err)
	}
	return nil
}

// Close flushes and closes the writer and its connections.
func (d *DeadLetter) Close() error {
	err := d.w.Close()
	d.tr.CloseIdleConnections()
	return err
}

// MemDeadLetter is an in-memory DeadLetterWriter for tests. Fail, when
// set, is returned by Write (and nothing is stored); Delay slows each
// Write. SetFail changes Fail while it is in use.
type MemDeadLetter struct {
	mu     sync.Mutex
	recs   []DeadLetterRecord
	writes int
	Fail   error
	Delay  time.Duration
}

// Write stores recs.
func (m *MemDeadLetter) Write(ctx context.Context, recs []DeadLetterRecord) error {
	if m.Delay > 0 {
		select {
		case <-time.After(m.Delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if m.Fail != nil {
		return m.Fail
	}
	m.recs = append(m.recs, recs...)
	return nil
}

// SetFail sets Fail (nil: writes succeed again).
func (m *MemDeadLetter) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Fail = err
}

// Records returns the stored records and the number of Write calls.
func (m *MemDeadLetter) Records() ([]DeadLetterRecord, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]DeadLetterRecord(nil), m.recs...), m.writes
}

// Close does nothing.
func (m *MemDeadLetter) Close() error { return nil }

// DeadLetterQueue writes dead letters asynchronously and in batches, so
// that a flood of bad messages costs the learner a channel send each, not
// a broker round trip. It holds at most Capacity records (Enqueue blocks
// beyond: bounded memory, nothing dropped). A batch whose write fails
// goes to the spill (a bounded file in snapshot.dir, when there is one
// and it has room): stored durably, it counts as written, and the spill
// is sent to the topic again with a back-off up to DeadLetterMaxBackoff
// until the topic takes it; batches that come meanwhile join the spill.
// Without room, the batch is written again, with the back-off, until it
// is stored or the queue is closed (Failing meanwhile): nothing is
// dropped. Flush waits until every record enqueued before it has been
// written or spilled; the service flushes before it commits offsets (and
// postpones its snapshots while Failing), so a committed offset never
// covers a dead letter not yet stored.
type DeadLetterQueue struct {
	w       DeadLetterWriter
	spill   *Spill
	ch      chan dlItem
	bytes   *semaphore.Weighted // values queued, bounded by the byte capacity
	limit   int64
	onError func(recs []DeadLetterRecord, err error)
	failing atomic.Bool
	// queued and stored count records enqueued and stored (written or
	// spilled): equal, a flush has nothing to wait for.
	queued, stored atomic.Int64
	done           chan struct{}
	stop           context.CancelFunc
	closeMu        sync.Once
}

type dlItem struct {
	rec   DeadLetterRecord
	n     int64         // bytes held in the semaphore
	flush chan struct{} // non-nil: a flush marker
}

// DeadLetterBatch is the most records one Write carries; DeadLetterTimeout
// bounds one Write (its records then count as failed).
const (
	DeadLetterBatch      = 512
	DeadLetterTimeout    = 30 * time.Second
	DeadLetterMaxBackoff = 5 * time.Second
)

// NewDeadLetterQueue starts the queue's writer. It holds at most capacity
// records and capBytes bytes of their keys and values (a record larger
// than capBytes passes alone). spill, when not nil, takes the batches the
// topic refuses (see DeadLetterQueue); records an earlier run left in it
// are sent first. onError is called (from the writer goroutine) with the
// records of every Write that failed, and with none when a spill's
// records could not be sent; they are written again.
func NewDeadLetterQueue(w DeadLetterWriter, capacity int, capBytes int64, spill *Spill, onError func([]DeadLetterRecord, error)) *DeadLetterQueue {
	ctx, cancel := context.WithCancel(context.Background())
	capBytes = max(capBytes, 1)
	q := &DeadLetterQueue{w: w, spill: spill, ch: make(chan dlItem, max(capacity, 1)), bytes: semaphore.NewWeighted(capBytes), limit: capBytes,
		onError: onError, done: make(chan struct{}), stop: cancel}
	go q.run(ctx)
	return q
}

// Spilled returns the records in the spill, waiting to be sent, and their
// bytes (0, 0 without a spill, or for a nil queue).
func (q *DeadLetterQueue) Spilled() (records, bytes int64) {
	if q == nil || q.spill == nil {
		return 0, 0
	}
	return q.spill.Len()
}

// Enqueue queues rec, waiting while the queue is full.
func (q *DeadLetterQueue) Enqueue(ctx context.Context, rec DeadLetterRecord) error {
	n := min(int64(len(rec.Msg.Value)+len(rec.Msg.Key)), q.limit)
	if err := q.bytes.Acquire(ctx, n); err != nil {
		return err
	}
	q.queued.Add(1)
	select {
	case q.ch <- dlItem{rec: rec, n: n}:
		return nil
	case <-ctx.Done():
		q.queued.Add(-1)
		q.bytes.Release(n)
		return ctx.Err()
	case <-q.done:
		q.queued.Add(-1)
		q.bytes.Release(n)
		return errors.New("ingest: dead-letter queue closed")
	}
}

// Flush waits until everything enqueued before it has been handled. With
// nothing waiting it returns nil at once, whatever ctx (a stop whose
// deadline has passed does not report dead letters it does not have).
func (q *DeadLetterQueue) Flush(ctx context.Context) error {
	if q.stored.Load() >= q.queued.Load() {
		return nil
	}
	mark := make(chan struct{})
	select {
	case q.ch <- dlItem{flush: mark}:
	case <-ctx.Done():
		return ctx.Err()
	case <-q.done:
		return errors.New("ingest: dead-letter queue closed")
	}
	select {
	case <-mark:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes (bounded by ctx) and stops the writer, then closes w.
func (q *DeadLetterQueue) Close(ctx context.Context) error {
	err := q.Flush(ctx)
	q.closeMu.Do(func() {
		q.stop()
		<-q.done
		if cerr := q.w.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Failing reports whether the queue is retrying a batch whose write
// failed: a flush now would wait for the dead-letter topic.
func (q *DeadLetterQueue) Failing() bool { return q.failing.Load() }

// write writes batch, again after each failure (reported to onError)
// with a doubling back-off, until it is stored (true) or ctx ends.
func (q *DeadLetterQueue) write(ctx context.Context, batch []DeadLetterRecord) bool {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, DeadLetterMaxBackoff) {
		wctx, cancel := context.WithTimeout(ctx, DeadLetterTimeout)
		err := q.w.Write(wctx, batch)
		cancel()
		if err == nil {
			q.failing.Store(false)
			return true
		}
		q.failing.Store(true)
		if q.onError != nil {
			q.onError(batch, err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// spilled appends batch to the spill when there is one with room.
func (q *DeadLetterQueue) spilled(batch []DeadLetterRecord) bool {
	if q.spill == nil {
		return false
	}
	ok, err := q.spill.Append(batch)
	if err != nil && q.onError != nil {
		q.onError(nil, err)
	}
	return ok && err == nil
}

// store writes batch, or spills it: behind a spill not yet sent (the
// topic is failing), or after a failed write. Without room it writes
// again until stored (write); false when ctx ended first.
func (q *DeadLetterQueue) store(ctx context.Context, batch []DeadLetterRecord) bool {
	if n, _ := q.Spilled(); n > 0 && q.spilled(batch) {
		return true
	}
	wctx, cancel := context.WithTimeout(ctx, DeadLetterTimeout)
	err := q.w.Write(wctx, batch)
	cancel()
	if err == nil {
		return true
	}
	if q.onError != nil {
		q.onError(batch, err)
	}
	if ctx.Err() == nil && q.spilled(batch) {
		return true
	}
	return q.write(ctx, batch)
}

func (q *DeadLetterQueue) run(ctx context.Context) {
	defer close(q.done)
	batch := make([]DeadLetterRecord, 0, DeadLetterBatch)
	// drain sends the spill to the topic while it holds records, after a
	// back-off that doubles while the topic refuses them.
	wait := 100 * time.Millisecond
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		var drainC <-chan time.Time
		if n, _ := q.Spilled(); n > 0 {
			drainC = retry.C
		}
		var it dlItem
		select {
		case <-ctx.Done():
			q.spillQueued(nil)
			return
		case <-drainC:
			if err := q.spill.Drain(ctx, q.w); err != nil {
				if ctx.Err() == nil && q.onError != nil {
					q.onError(nil, err)
				}
				wait = min(2*wait, DeadLetterMaxBackoff)
			} else {
				wait = 100 * time.Millisecond
			}
			retry.Reset(wait)
			continue
		case it = <-q.ch:
		}
		var marks []chan struct{}
		var held int64
		collect := func(it dlItem) {
			if it.flush != nil {
				marks = append(marks, it.flush)
			} else {
				batch = append(batch, it.rec)
				held += it.n
			}
		}
		collect(it)
	drain:
		for len(batch) < DeadLetterBatch {
			select {
			case it = <-q.ch:
				collect(it)
			default:
				break drain
			}
		}
		if len(batch) > 0 && !q.store(ctx, batch) {
			// Closed with the batch unwritten: to the spill with what
			// is queued behind it, if there is room; its flushes never
			// complete.
			q.spillQueued(batch)
			return
		}
		q.stored.Add(int64(len(batch)))
		q.bytes.Release(held)
		for _, m := range marks {
			close(m)
		}
		clear(batch)
		batch = batch[:0]
	}
}

// spillQueued spills batch and the records still queued, at the close:
// a restart sends them (and re-reads their messages only if the last
// snapshot does not cover them).
func (q *DeadLetterQueue) spillQueued(batch []DeadLetterRecord) {
	rest := slices.Clone(batch)
	for {
		select {
		case it := <-q.ch:
			if it.flush == nil {
				rest = append(rest, it.rec)
			}
			continue
		default:
		}
		break
	}
	if len(rest) > 0 {
		q.spilled(rest)
	}
}
