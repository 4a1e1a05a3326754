package ingest

import (
	"context"
	"errors"
	"math"
	"testing"
)

// fakeShape is a model of fixed dimensions whose domain is x[0] ≥ 0.
type fakeShape struct {
	dx, dy int
	two    bool
}

func (f *fakeShape) Dims() (int, int) { return f.dx, f.dy }
func (f *fakeShape) TwoView() bool    { return f.two }
func (f *fakeShape) CheckInput(x, _ []float64) error {
	if x[0] < 0 {
		return errors.New("x[0] < 0 outside the kernel's domain")
	}
	return nil
}

// Each message below is refused for the reason written beside it, in the
// order of the checks, or admitted; the reasons are the decoder's and
// the model's as documented (Reasons), not the code's output.
func TestAdmissionRefusesForTheFirstFailingCheck(t *testing.T) {
	parseErr := &BadMessageError{Reason: ReasonMalformed, Err: errors.New("not a vector")}
	for _, c := range []struct {
		name   string
		model  fakeShape
		dim    int // kafka.dim
		x, y   []float64
		perr   error
		reason string // "" admitted
	}{
		{"parse error first", fakeShape{}, 0, []float64{-1}, nil, parseErr, ReasonMalformed},
		{"no values", fakeShape{}, 0, nil, nil, nil, ReasonDimension},
		{"kafka.dim before the values", fakeShape{}, 3, []float64{math.NaN(), 1}, nil, nil, ReasonDimension},
		{"non-finite before the domain", fakeShape{}, 0, []float64{-1, math.Inf(1)}, nil, nil, ReasonNonFinite},
		{"out of range", fakeShape{}, 0, []float64{1, 1e13}, nil, nil, ReasonOutOfRange},
		{"the model's dimension", fakeShape{dx: 3}, 0, []float64{1, 2}, nil, nil, ReasonDimension},
		{"two views need a y", fakeShape{two: true}, 0, []float64{1, 2}, nil, nil, ReasonDimension},
		{"y's dimension", fakeShape{two: true, dy: 2}, 0, []float64{1, 2}, []float64{1}, nil, ReasonDimension},
		{"the kernel's domain", fakeShape{}, 0, []float64{-1, 2}, nil, nil, ReasonDomain},
		{"admitted", fakeShape{dx: 2}, 2, []float64{1, 2}, nil, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAdmission(Decoder{Format: FormatJSON, Dim: c.dim}, &c.model, nil)
			x, y, err := a.Admit(c.x, c.y, c.perr)
			if got := Reason(err); got != c.reason || (c.reason != "" && err == nil) {
				t.Fatalf("reason %q (%v), want %q", got, err, c.reason)
			}
			if c.reason == "" && (len(x) != len(c.x) || y != nil) {
				t.Errorf("admitted x %v y %v, want x %v and no y (one view)", x, y, c.x)
			}
		})
	}
}

// A refused message never decides the stream's dimension; the first one
// admitted does, and from then on another dimension is refused.
func TestAdmissionTheFirstAdmittedDecidesTheDimension(t *testing.T) {
	a := NewAdmission(Decoder{Format: FormatJSON}, &fakeShape{}, nil)
	if a.Decided() {
		t.Fatal("decided before any message")
	}
	if _, _, err := a.Admit([]float64{-1, 0, 0, 0}, nil, nil); Reason(err) != ReasonDomain {
		t.Fatalf("want domain, got %v", err)
	}
	if a.Decided() {
		t.Fatalf("a refused message of 4 values decided the dimension (%d)", a.Dim())
	}
	if _, _, err := a.Admit([]float64{1, 2}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if a.Dim() != 2 {
		t.Fatalf("dimension %d after the first admitted message of 2 values", a.Dim())
	}
	if _, _, err := a.Admit([]float64{1, 2, 3}, nil, nil); Reason(err) != ReasonDimension {
		t.Fatalf("3 values after the stream's 2: want dimension, got %v", err)
	}
}

// Decide takes the most common dimension among messages that are good
// whatever the dimension; the first in a tie.
func TestAdmissionDecidesTheMostCommonDimension(t *testing.T) {
	rows := []struct {
		x   []float64
		err error
	}{
		{[]float64{1, 2, 3}, nil},                    // the stray first message
		{[]float64{1, 2, 3, 4}, errors.New("parse")}, // no say
		{[]float64{math.NaN(), 1, 1, 1}, nil},        // no say
		{[]float64{1, 2}, nil},
		{[]float64{3, 4}, nil},
	}
	a := NewAdmission(Decoder{Format: FormatJSON}, &fakeShape{}, nil)
	dim, voters, with := a.Decide(len(rows), func(i int) ([]float64, []float64, error) { return rows[i].x, nil, rows[i].err })
	if dim != 2 || voters != 3 || with != 2 || a.Dim() != 2 {
		t.Fatalf("decided %d (%d of %d voters), Dim %d: want 2 (2 of 3)", dim, with, voters, a.Dim())
	}
	tie := NewAdmission(Decoder{Format: FormatJSON}, &fakeShape{}, nil)
	if dim, _, _ := tie.Decide(2, func(i int) ([]float64, []float64, error) { return rows[3*i].x, nil, nil }); dim != 3 {
		t.Fatalf("a tie between 3 (first) and 2 decided %d", dim)
	}
}

// Refuse writes the dead letter with its reason; a parse error without
// one is malformed.
func TestAdmissionRefuseDeadLetters(t *testing.T) {
	mem := &MemDeadLetter{}
	q := NewDeadLetterQueue(mem, 4, 1<<20, nil, nil)
	a := NewAdmission(Decoder{Format: FormatJSON}, &fakeShape{}, q)
	m := Message{Topic: "t", Partition: 1, Offset: 7, Value: []byte("{")}
	if r, err := a.Refuse(context.Background(), m, errors.New("eof")); r != ReasonMalformed || err != nil {
		t.Fatalf("reason %q, err %v", r, err)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, _ := mem.Records()
	if len(recs) != 1 || recs[0].Reason != ReasonMalformed || recs[0].Msg.Offset != 7 || recs[0].Error != "eof" {
		t.Fatalf("dead letters %+v", recs)
	}
}
