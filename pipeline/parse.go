package pipeline

import (
	"context"
	"errors"
	"github.com/rs/zerolog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/ingest"
)

// parsed is a message whose values were parsed ahead of the loop.
type parsed struct {
	m    ingest.Message
	x, y []float64
	// err is a parse error (empty, oversized, malformed): the message is
	// bad whatever the model. The model-dependent checks (dimension, range)
	// stay on the loop, in order.
	err error
	// n is the bytes it holds against the stage's budget.
	n int64
	// gen is the consumer group generation it was read in.
	gen int32
	// rewind: its partition is read again from this message's offset,
	// below the one consumed (ingest.Batch.Rewound).
	rewind bool
	// refed: handed to the loop again after waiting for the stream's
	// dimension (loop.decide); its budget is already released.
	refed bool
}

// Back-off of parseAhead after a failed Fetch.
const (
	fetchRetryMin = 100 * time.Millisecond
	fetchRetryMax = 5 * time.Second
)

// outage is since when a dependency has failed, and its last error
// (zero while it works); safe for concurrent use, nil-safe.
type outage struct {
	mu    sync.Mutex
	since time.Time
	err   error
}

func (o *outage) down(err error) {
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

func (o *outage) up() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.since, o.err = time.Time{}, nil
}

func (o *outage) get() (time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.since, o.err
}

// isRegistryError reports whether err is a Schema Registry that cannot
// answer (ingest.RegistryError).
func isRegistryError(err error) bool {
	var re *ingest.RegistryError
	return errors.As(err, &re)
}

// parseAhead fetches batches from src and parses their messages, in
// order, into slices on out, on its own goroutine, so that parsing the
// next batch's text overlaps learning the current one (on a 2-core
// machine parsing JSON was most of what the service added to the
// learner's time at d = 784). A Fetch returns at most max messages. The
// messages parsed and not yet handled by the loop hold at most budget
// bytes (raw message plus parsed values; the loop releases them): memory
// stays bounded when the loop stops taking messages. ahead counts them.
// It returns when ctx is done; messages fetched and not handed over are
// covered by no offset and come again after a restart. A failed Fetch is
// logged (once per run of failures) and retried after a back-off that
// doubles from fetchRetryMin to fetchRetryMax; so is a message whose
// schema the Schema Registry cannot give now (ingest.RegistryError), in
// order: the messages before it go on to the loop.
func parseAhead(ctx context.Context, log zerolog.Logger, dec ingest.Decoder, src ingest.Source, out chan<- []parsed, sem *semaphore.Weighted, budget int64, max int, ahead *atomic.Int64, registry *outage) {
	send := func(ps []parsed) bool {
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
		b, err := src.Fetch(ctx, max)
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
		ps := make([]parsed, 0, len(b.Messages))
		for i, m := range b.Messages {
			x, y, err := dec.Parse(nil, nil, m.Value)
			if wait := time.Duration(0); isRegistryError(err) {
				// The registry cannot answer: the message is not at
				// fault. Parse it again until it does (lag grows); what
				// is parsed so far goes to the loop meanwhile.
				if !send(ps) {
					return
				}
				ps = make([]parsed, 0, len(b.Messages)-i)
				for isRegistryError(err) {
					if wait == 0 {
						wait = fetchRetryMin
						registry.down(err)
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
				registry.up()
				log.Info().Msg("the schema registry answers again")
			}
			n := min(int64(len(m.Value)+8*(len(x)+len(y))), budget)
			if !sem.TryAcquire(n) {
				// Hand over what is parsed first: the loop releases
				// the budget as it handles messages.
				if !send(ps) {
					return
				}
				ps = make([]parsed, 0, len(b.Messages))
				if sem.Acquire(ctx, n) != nil {
					return
				}
			}
			ahead.Add(1)
			ps = append(ps, parsed{m: m, x: x, y: y, err: err, n: n, gen: b.Generation, rewind: b.Rewound && i == 0})
		}
		if !send(ps) {
			return
		}
	}
}
