package pipeline

import (
	"context"

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
}

// parseAhead parses the messages of in, in order, into out on its own
// goroutine, so that parsing the next batch's text overlaps learning the
// current one (on a 2-core machine parsing JSON was most of what the
// service added to the learner's time at d = 784). It holds at most
// budget bytes (raw message plus parsed values) that the loop has not
// released: memory stays bounded when the loop stops taking messages. It
// returns when ctx is done or in is closed.
func parseAhead(ctx context.Context, dec ingest.Decoder, in <-chan ingest.Message, out chan<- parsed, sem *semaphore.Weighted, budget int64) {
	for {
		var m ingest.Message
		var ok bool
		select {
		case <-ctx.Done():
			return
		case m, ok = <-in:
			if !ok {
				return
			}
		}
		x, y, err := dec.Parse(nil, nil, m.Value)
		n := min(int64(len(m.Value)+8*(len(x)+len(y))), budget)
		if sem.Acquire(ctx, n) != nil {
			return
		}
		select {
		case out <- parsed{m: m, x: x, y: y, err: err, n: n}:
		case <-ctx.Done():
			return
		}
	}
}
