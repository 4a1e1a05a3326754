package cluster

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
)

// peer is a Gatherer of two members whose other member sends what the
// fuzzer gives, whatever the round.
type peer struct{ data []byte }

func (p *peer) Size() int { return 2 }
func (p *peer) Rank() int { return 0 }
func (p *peer) AllGather(_ context.Context, _ uint64, own []byte) ([][]byte, error) {
	return [][]byte{own, p.data}, nil
}
func (p *peer) AllToAll(_ context.Context, _ uint64, parts [][]byte) ([][]byte, error) {
	return [][]byte{parts[0], p.data}, nil
}

// FuzzPeerPayloads: whatever another member sends (anyone who may publish
// on the cluster subjects), joining and stepping return an error or
// succeed; they never panic, and a refused payload changes no model.
func FuzzPeerPayloads(f *testing.F) {
	payload := func(kind byte, fill func(e *enc)) []byte {
		var e enc
		e.start(kind)
		fill(&e)
		return e.b
	}
	f.Add(payload(kindStatus, func(e *enc) { e.b = append(e.b, make([]byte, 32)...); e.str("K=3\n"); e.u8(1); e.u64(5); e.u64(9) }))
	f.Add(payload(kindMoments, func(e *enc) {
		e.u64(1)
		e.u64(64)
		e.u32(3)
		e.floats([]float64{1, 2})
		e.floats([]float64{1, 2, 3, 4})
		e.offsets(Offsets{"t": {1: 5}})
		e.floats([]float64{0.1, 0.2})
		e.u64(3)
	}))
	f.Add(payload(kindPartial, func(e *enc) { e.floats([]float64{1}); e.floats(nil); e.floats(nil); e.floats(nil) }))
	f.Add(payload(kindFirst, func(e *enc) { e.u32(2); e.u32(3); e.floats([]float64{1, 2, 3, 4, 5, 6}); e.offsets(nil); e.u64(0) }))
	f.Add(payload(kindAbort, func(e *enc) { e.str("no") }))
	f.Add(payload(kindSlice, func(e *enc) { e.u8(1); e.lens(partLens{4, 0, 0, 0}); e.floats([]float64{1, 2}) }))
	f.Add(payload(kindReduced, func(e *enc) { e.u8(1); e.lens(partLens{4, 0, 0, 0}); e.floats([]float64{3, 4}) }))
	f.Add([]byte("SKC3"))
	cfg := online.Config{Model: "f", K: 2, BlockSize: 16, MaxFeatures: 64, Workers: 1,
		Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}}
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, 64*3)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p := &peer{data: data}
		// A member without a model: the status round, then a first step.
		m, err := Join(ctx, p, cfg, nil)
		if err == nil {
			_ = m.Step(ctx, x, 64, nil)
			m.Close()
		}
		// A member with a model: a data-parallel step.
		l, err := online.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Update(x, 64); err != nil {
			t.Fatal(err)
		}
		m = &Member{g: p, cfg: cfg, fp: fingerprint(cfg), l: l, next: Offsets{}}
		defer m.Close()
		before := l.Snapshot().Coef[0]
		if err := m.Step(ctx, x[:32*3], 32, nil); err != nil {
			after := l.Snapshot().Coef[0]
			for i := range before {
				if before[i] != after[i] && !(before[i] != before[i]) {
					t.Fatalf("a refused step (%v) changed coefficient %d", err, i)
				}
			}
		}
	})
}
