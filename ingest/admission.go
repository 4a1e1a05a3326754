package ingest

import (
	"context"
	"errors"
	"fmt"
)

// Shape is what admission asks of the model the messages are for: its
// dimensions (0 while not fixed), whether it learns from two views, and
// the kernel's domain (a *BadMessageError is not needed: any error
// refuses the message with reason domain).
type Shape interface {
	Dims() (x, y int)
	TwoView() bool
	CheckInput(x, y []float64) error
}

// Admission decides, in the stream's order, whether a parsed message is
// a row the model can learn: every check a message passes before the
// learner sees it is here, in this order — its syntax and size (the
// parse error, Decoder.Parse), its dimensions against the stream's, its
// values (non_finite, out_of_range: Decoder.MaxAbs), its dimensions
// against the model's and the y a two-view model needs, the kernel's
// domain — and the dead letter of one that fails.
//
// The stream's dimensions are decided once: by kafka.dim (Decoder.Dim),
// by the model (Shape.Dims), by the first batch's most common (Decide)
// or else by the first message admitted; a refused message never
// decides them. Admission is owned by one goroutine (the run loop); the
// decoder that parses ahead on another reads none of its state.
type Admission struct {
	// limits is the value bound and, in Dim and DimY, the stream's
	// dimensions once decided (0: not yet).
	limits Decoder
	model  Shape
	dlq    *DeadLetterQueue
}

// NewAdmission returns the admission of messages parsed by dec (its
// Dim, DimY and MaxAbs are the stream's settings) for model, whose
// refused messages go to dlq (nil: none are written, for tools that
// only count them).
func NewAdmission(dec Decoder, model Shape, dlq *DeadLetterQueue) *Admission {
	return &Admission{limits: dec, model: model, dlq: dlq}
}

// Dim is the stream's dimension of x: decided, or the model's, or 0
// while neither is known.
func (a *Admission) Dim() int {
	if a.limits.Dim != 0 {
		return a.limits.Dim
	}
	dx, _ := a.model.Dims()
	return dx
}

// Decided reports whether the stream's dimension is known (see Decide).
func (a *Admission) Decided() bool { return a.Dim() != 0 }

// Admit checks one parsed message: x and y as Decoder.Parse returned
// them with its error. It returns the row to learn (y nil for a one-view
// model, which ignores it) or the reason it is refused, a
// *BadMessageError; the first message admitted fixes a dimension not
// yet decided.
func (a *Admission) Admit(x, y []float64, parseErr error) ([]float64, []float64, error) {
	if parseErr != nil {
		return nil, nil, parseErr
	}
	if err := a.limits.check(x, y); err != nil {
		return nil, nil, err
	}
	dx, dy := a.model.Dims()
	if dx != 0 && len(x) != dx {
		return nil, nil, &BadMessageError{Reason: ReasonDimension, Err: fmt.Errorf("%d values, model dimension %d", len(x), dx)}
	}
	learnY := y
	if !a.model.TwoView() {
		learnY = nil // a one-view model ignores y
	} else {
		if len(y) == 0 {
			return nil, nil, &BadMessageError{Reason: ReasonDimension, Err: errors.New("learner.algorithm learns from two views and needs {\"x\":[...],\"y\":[...]} (or \"target\"); the message has no y")}
		}
		if dy != 0 && len(y) != dy {
			return nil, nil, &BadMessageError{Reason: ReasonDimension, Err: fmt.Errorf("y has %d values, model dimension %d", len(y), dy)}
		}
	}
	if err := a.model.CheckInput(x, learnY); err != nil {
		return nil, nil, &BadMessageError{Reason: ReasonDomain, Err: err}
	}
	// Only a message that passed every check fixes an unset dimension.
	if a.limits.Dim == 0 {
		a.limits.Dim = len(x)
	}
	if a.limits.DimY == 0 && len(y) > 0 {
		a.limits.DimY = len(y)
	}
	return x, learnY, nil
}

// Decide fixes the stream's dimension as the most common among the n
// messages at(i) gives (x, y and the parse error), the first of them in
// a tie: messages that are bad whatever the dimension (unparseable,
// non-finite, beyond the bound) have no say. It returns the dimension,
// how many messages had a say and how many of them have it. Called
// while the dimension is not decided, with a first batch: a stray first
// message of another dimension is then refused instead of fixing the
// dimension for the whole good stream.
func (a *Admission) Decide(n int, at func(i int) (x, y []float64, err error)) (dim, voters, with int) {
	count := map[int]int{}
	lim := a.limits
	lim.Dim, lim.DimY = 0, 0
	for i := range n {
		x, y, err := at(i)
		if err != nil || lim.check(x, y) != nil {
			continue
		}
		voters++
		count[len(x)]++
		if count[len(x)] > count[dim] {
			dim = len(x)
		}
	}
	a.limits.Dim = dim
	return dim, voters, count[dim]
}

// Refuse dead-letters message m, refused for err (the reason is
// Reason(err), malformed when it has none), waiting for room in the
// queue until ctx ends. It returns the reason, and an error when the
// record could not be queued (the stop, or Kill).
func (a *Admission) Refuse(ctx context.Context, m Message, err error) (string, error) {
	reason := Reason(err)
	if reason == "" {
		reason = ReasonMalformed
	}
	if a.dlq == nil {
		return reason, nil
	}
	return reason, a.dlq.Enqueue(ctx, DeadLetterRecord{Msg: m, Reason: reason, Error: err.Error()})
}

// Parser is the decoder to parse messages with, on any goroutine: a
// copy, whose format and size bound are all Decoder.Parse reads.
func (a *Admission) Parser() Decoder { return a.limits }

// DeadLetters is the queue refused messages go to (nil: none).
func (a *Admission) DeadLetters() *DeadLetterQueue { return a.dlq }
