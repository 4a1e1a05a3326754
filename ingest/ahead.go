package ingest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"
)

// Back-off of Ahead.Run after a failed Fetch.
const (
	fetchRetryMin = 100 * time.Millisecond
	fetchRetryMax = 5 * time.Second
)

// Outage is since when a dependency has failed, and its last error
// (zero while it works); safe for concurrent use, nil-safe.
type Outage struct {
	mu    sync.Mutex
	since time.Time
	err   error
}

// Down records a failure.
func (o *Outage) Down(err error) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		o.since = time.Now()
	}
	o.err = err
}

// Up records that it works.
func (o *Outage) Up() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.since, o.err = time.Time{}, nil
}

// Since says since when it has failed and why (zero while it works).
func (o *Outage) Since() (time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.since, o.err
}

// isRegistryError reports whether err is a Schema Registry that cannot
// answer (RegistryError).
func isRegistryError(err error) bool {
	var re *RegistryError
	return errors.As(err, &re)
}

// Ahead parses a source's messages ahead of the learner (Run).
type Ahead struct {
	Source  Source
	Decoder Decoder // Parse only: Admission checks the rest, in order
	Log     zerolog.Logger
	// Max is the most messages a Fetch returns.
	Max int
	// Budget bounds the bytes of the messages parsed and not yet
	// handled (the raw message plus its parsed values; a message larger
	// than Bytes, the budget's size, counts as Bytes); whoever handles a
	// message releases its Parsed.Bytes. Pending counts those messages.
	Budget  *semaphore.Weighted
	Bytes   int64
	Pending *atomic.Int64
	// Registry records the Schema Registry's outage (nil: none kept).
	Registry *Outage
}

// Parsed is a message parsed ahead of the learner.
type Parsed struct {
	Msg  Message
	X, Y []float64
	// Err is a parse error (empty, oversized, malformed): the message is
	// bad whatever the model. The checks that depend on the model
	// (Admission) stay on the learner's side, in order.
	Err error
	// Bytes is what it holds against Ahead.Budget.
	Bytes int64
	// Generation is the consumer group generation it was read in.
	Generation int32
	// Rewind: its partition is read again from this message's offset,
	// below the one consumed (Batch.Rewound).
	Rewind bool
}

// Run fetches batches from the source and parses their messages, in
// order, into slices on out, on its own goroutine, so that parsing the
// next batch's text overlaps learning the current one (on a 2-core
// machine parsing JSON was most of what the service added to the
// learner's time at d = 784). The messages parsed and not yet handled
// hold at most the budget: memory stays bounded when the learner stops
// taking messages.
// It returns when ctx is done; messages fetched and not handed over are
// covered by no offset and come again after a restart. A failed Fetch is
// logged (once per run of failures) and retried after a back-off that
// doubles from fetchRetryMin to fetchRetryMax; so is a message whose
// schema the Schema Registry cannot give now (RegistryError), in order:
// the messages before it go on to the learner.
func (a Ahead) Run(ctx context.Context, out chan<- []Parsed) {
	log, dec, src, sem, budget, registry := a.Log, a.Decoder, a.Source, a.Budget, a.Bytes, a.Registry
	send := func(ps []Parsed) bool {
		if len(ps) == 0 {
			return true
		}
		select {
		case out <- ps:
			return true
		case <-ctx.Done():
			return false
		}
	}
	retry := time.Duration(0)
	for {
		b, err := src.Fetch(ctx, a.Max)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if retry == 0 {
				retry = fetchRetryMin
				log.Warn().Err(err).Int64("retry_in_ms", retry.Milliseconds()).Msg("fetching from the source failed; retrying with back-off")
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
			retry = min(2*retry, fetchRetryMax)
			continue
		}
		if retry > 0 {
			log.Info().Msg("fetching from the source works again")
			retry = 0
		}
		ps := make([]Parsed, 0, len(b.Messages))
		for i, m := range b.Messages {
			x, y, err := dec.Parse(nil, nil, m.Value)
			if wait := time.Duration(0); isRegistryError(err) {
				// The registry cannot answer: the message is not at
				// fault. Parse it again until it does (lag grows); what
				// is parsed so far goes to the learner meanwhile.
				if !send(ps) {
					return
				}
				ps = make([]Parsed, 0, len(b.Messages)-i)
				for isRegistryError(err) {
					if wait == 0 {
						wait = fetchRetryMin
						registry.Down(err)
						log.Error().Err(err).Int("partition", m.Partition).Int64("offset", m.Offset).Msg("the schema registry cannot answer: the stream waits for it (nothing is dead-lettered or skipped)")
					}
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
					wait = min(2*wait, fetchRetryMax)
					x, y, err = dec.Parse(nil, nil, m.Value)
				}
				registry.Up()
				log.Info().Msg("the schema registry answers again")
			}
			n := min(int64(len(m.Value)+8*(len(x)+len(y))), budget)
			if !sem.TryAcquire(n) {
				// Hand over what is parsed first: the learner's side
				// releases the budget as it handles messages.
				if !send(ps) {
					return
				}
				ps = make([]Parsed, 0, len(b.Messages))
				if sem.Acquire(ctx, n) != nil {
					return
				}
			}
			a.Pending.Add(1)
			ps = append(ps, Parsed{Msg: m, X: x, Y: y, Err: err, Bytes: n, Generation: b.Generation, Rewind: b.Rewound && i == 0})
		}
		if !send(ps) {
			return
		}
	}
}
