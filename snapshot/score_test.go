package snapshot

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"gonum.org/v1/gonum/mat"
)

// uncentredSample is sample() without its centre: 3 blocks of 4 Gaussian
// features, k = 2, standardised 2-dimensional input.
func uncentredSample() *Snapshot {
	s := sample()
	s.Header.Views[0].Center = nil
	return s
}

// featureVector is φ(x) by the package doc's definition, computed here by
// hand: each block's √(2/B)·cos2π(x̃·Ω' + β), the blocks stacked and
// divided by √J.
func featureVector(s *Snapshot, x []float64) []float64 {
	v := s.Header.Views[0]
	xs := []float64{(x[0] - v.Preprocess.Mean[0]) / v.Preprocess.Scale[0], (x[1] - v.Preprocess.Mean[1]) / v.Preprocess.Scale[1]}
	fm := features.Map{Kernel: v.Kernel, Dim: 2, BlockSize: 4}
	J := float64(len(s.Header.Seeds))
	var phi []float64
	for _, seed := range s.Header.Seeds {
		var b features.Block
		fm.Generate(&b, seed)
		for f := 0; f < 4; f++ {
			z := b.Phase[f] + xs[0]*b.Omega[f] + xs[1]*b.Omega[4+f]
			phi = append(phi, math.Sqrt(0.5)*math.Cos(2*math.Pi*z)/math.Sqrt(J))
		}
	}
	return phi
}

// TestScoreResidualClosedForm: the residual is ‖φ(x)‖² − ‖Qᵀφ(x)‖², Q an
// orthonormal basis of the components' span from gonum's QR of the
// coefficients — another route than Score's whitened Gram matrix — and
// the projections are Project's bits.
func TestScoreResidualClosedForm(t *testing.T) {
	s := uncentredSample()
	m, err := NewModel(s, ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var qr mat.QR
	qr.Factorize(mat.NewDense(12, 2, s.Coef[0]))
	var q mat.Dense
	qr.QTo(&q)
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, 2*20)
	for i := range xs {
		xs[i] = 2 * rng.NormFloat64()
	}
	proj, res, err := m.Score(nil, nil, xs)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.Project(nil, xs)
	for i := range want {
		if proj[i] != want[i] {
			t.Fatalf("projection %d: Score %v, Project %v (must be the same bits)", i, proj[i], want[i])
		}
	}
	for r := 0; r < 20; r++ {
		phi := featureVector(s, xs[2*r:2*r+2])
		norm, in := 0.0, 0.0
		for _, v := range phi {
			norm += v * v
		}
		for c := 0; c < 2; c++ {
			dot := 0.0
			for i, v := range phi {
				dot += q.At(i, c) * v
			}
			in += dot * dot
		}
		if math.Abs(res[r]-(norm-in)) > 1e-12 {
			t.Errorf("row %d: residual %v, ‖φ‖² − ‖Qᵀφ‖² = %v", r, res[r], norm-in)
		}
		if res[r] < 0 || res[r] > norm+1e-15 {
			t.Errorf("row %d: residual %v outside [0, ‖φ‖² = %v]", r, res[r], norm)
		}
	}
}

// TestScoreResidualZeroInSpan: a model whose first component is φ(x₀)
// itself leaves x₀ no residual.
func TestScoreResidualZeroInSpan(t *testing.T) {
	s := uncentredSample()
	x0 := []float64{0.3, -0.7}
	phi := featureVector(s, x0)
	J := math.Sqrt(float64(len(s.Header.Seeds)))
	rng := rand.New(rand.NewPCG(1, 1))
	for i, v := range phi {
		// Coefficients multiply the blocks' own features (Φ_j = √J·φ).
		s.Coef[0][i*2] = v / J
		s.Coef[0][i*2+1] = rng.NormFloat64()
	}
	m, err := NewModel(s, ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, res, err := m.Score(nil, nil, x0)
	if err != nil {
		t.Fatal(err)
	}
	// 0 up to the Gram matrix's jitter (gramJitter: a relative 1e-12).
	if res[0] > 1e-10 {
		t.Errorf("residual of a point in the components' span: %v, want 0", res[0])
	}
}

func TestScoreCentredRefused(t *testing.T) {
	m, err := NewModel(sample(), ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Score(nil, nil, []float64{1, 2}); !errors.Is(err, ErrCentred) {
		t.Fatalf("a centred model scored: %v, want ErrCentred", err)
	}
	m, _ = NewModel(uncentredSample(), ModelOptions{})
	if _, _, err := m.Score(nil, nil, []float64{math.NaN(), 0}); err == nil {
		t.Error("NaN input scored")
	}
	if _, _, err := m.Score(nil, nil, []float64{1, 2, 3}); err == nil {
		t.Error("3 values for a 2-dimensional model scored")
	}
}

// TestNoveltyRanks: the rank by its definition on a small reference
// (ties count as not below), and none without a reference.
func TestNoveltyRanks(t *testing.T) {
	s := uncentredSample()
	m, _ := NewModel(s, ModelOptions{})
	if _, ok := m.Novelty(1); ok {
		t.Fatal("novelty without a reference")
	}
	s = uncentredSample()
	s.Header.Novelty = &Novelty{Residuals: []float64{0.3, 0.1, 0.2}}
	m, _ = NewModel(s, ModelOptions{})
	for _, c := range []struct{ r, want float64 }{{0.05, 0}, {0.1, 0}, {0.15, 0.25}, {0.2, 0.25}, {0.25, 0.5}, {0.3, 0.5}, {1, 0.75}} {
		if got, ok := m.Novelty(c.r); !ok || got != c.want {
			t.Errorf("Novelty(%v) = %v, %v; want %v", c.r, got, ok, c.want)
		}
	}
	s.Header.Novelty.Residuals = []float64{0.1, math.NaN()}
	if err := s.Validate(); err == nil {
		t.Error("a NaN reference residual validated")
	}
}

// TestNoveltyFalseAlarmBound: with residuals exchangeable with the
// reference (all i.i.d.), the share flagged at q is at most 1 − q; with
// n = 199 reference residuals and q = 0.99 it is exactly 2/200 = 0.01
// (a new point is flagged when it is above 198 of them). 10⁶ points over
// 2,000 references: the share within 4 standard errors of 0.01.
func TestNoveltyFalseAlarmBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const refs, per, n, q = 2000, 500, 199, 0.99
	flagged := 0
	for range refs {
		s := uncentredSample()
		ref := make([]float64, n)
		for i := range ref {
			ref[i] = rng.ExpFloat64()
		}
		s.Header.Novelty = &Novelty{Residuals: ref}
		m, _ := NewModel(s, ModelOptions{})
		for range per {
			if v, _ := m.Novelty(rng.ExpFloat64()); v >= q {
				flagged++
			}
		}
	}
	share := float64(flagged) / (refs * per)
	// Flags within one reference are dependent: a reference's flag rate
	// is Beta(2, 198) (mean 0.01, sd 0.0070), sampled 500 times; the
	// share's standard error over 2,000 references is about
	// sqrt((4.9e-5 + 0.01/500)/2000) = 1.9e-4, below this bound's 2.2e-4.
	se := math.Sqrt(0.01 * 0.99 / refs)
	if share > 1-q+4*se {
		t.Errorf("flagged share %.5f at q = %v, bound %.3f (+4 se = %.5f)", share, q, 1-q, 1-q+4*se)
	}
	if share < 1-q-4*se {
		t.Errorf("flagged share %.5f at q = %v: the rank should reach its bound %.3f exactly here", share, q, 1-q)
	}
	t.Logf("flagged %.5f of %d points at q = %v (bound %.2f)", share, refs*per, q, 1-q)
}
