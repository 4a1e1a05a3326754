package online

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestFitIsTheStreamInOrder: one epoch of Fit is the learner fed the rows
// in order, batch by batch (the documented contract: what the service
// learns from the same rows), bit for bit, for one and two views; a
// two-view Fit without y columns is a configuration error; a cancelled
// context stops it.
func TestFitIsTheStreamInOrder(t *testing.T) {
	const rows, b = 1000, 128
	x := curvedData(rand.New(rand.NewPCG(4, 4)), rows)
	d := len(x) / rows
	cfg := Config{K: 2, BlockSize: 32, MaxFeatures: 512}
	snap, rep, err := Fit(context.Background(), cfg, x, rows, d, FitOptions{Batch: b})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for s := 0; s < rows; s += b {
		n := min(b, rows-s)
		if err := l.Update(x[s*d:(s+n)*d], n); err != nil && !errors.Is(err, ErrDiverged) {
			t.Fatal(err)
		}
	}
	if !slices.Equal(snap.Coef[0], l.Snapshot().Coef[0]) || rep.Samples != rows || rep.Features != l.Features() {
		t.Errorf("Fit differs from the stream in order: %d samples, %d features", rep.Samples, rep.Features)
	}

	px, py := synth.TwoView(rand.New(rand.NewPCG(5, 5)), rows)
	xy := make([]float64, 0, rows*12)
	for r := 0; r < rows; r++ {
		xy = append(append(xy, px[r*6:(r+1)*6]...), py[r*6:(r+1)*6]...)
	}
	tcfg := Config{Algorithm: AlgKCCA, K: 2, BlockSize: 32, MaxFeatures: 256}
	tsnap, _, err := Fit(context.Background(), tcfg, xy, rows, 12, FitOptions{Batch: b, YCols: 6})
	if err != nil {
		t.Fatal(err)
	}
	tv, err := NewTwoView(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tv.Close()
	for s := 0; s < rows; s += b {
		n := min(b, rows-s)
		if err := tv.Update(px[s*6:(s+n)*6], py[s*6:(s+n)*6], n); err != nil && !errors.Is(err, ErrDiverged) {
			t.Fatal(err)
		}
	}
	if ts := tv.Snapshot(); !slices.Equal(tsnap.Coef[0], ts.Coef[0]) || !slices.Equal(tsnap.Coef[1], ts.Coef[1]) {
		t.Error("two-view Fit differs from the stream in order")
	}
	if _, _, err := Fit(context.Background(), tcfg, xy, rows, 12, FitOptions{}); !errors.Is(err, ErrConfig) {
		t.Errorf("two-view Fit without y columns: %v, want ErrConfig", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Fit(ctx, cfg, x, rows, d, FitOptions{Epochs: 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Fit: %v", err)
	}
}
