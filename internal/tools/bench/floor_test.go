package bench

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// RunFloor's floor against an independent computation: a model whose
// coefficients are set, by the SVD of its centred feature matrix (not the
// Gram matrix RunFloor sums), to the exact top-k PCA of its own features
// on the rows is the floor itself: its error equals the floor's and the
// learner's gap is 1; the floor's eigenvalues are the SVD's, and near
// exact kernel PCA's.
func TestFloorIsTheFeaturesExactPCA(t *testing.T) {
	const d, rows, k = 3, 300, 3
	rng := rand.New(rand.NewPCG(4, 4))
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64() * float64(1+i%d)
	}
	l, err := online.New(online.Config{K: k, BlockSize: 64, MaxFeatures: 256, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 2},
		Forget: online.ForgetOff, Frequencies: online.FrequenciesIID})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 8 {
		if err := l.Update(x, rows); err != nil {
			t.Fatal(err)
		}
	}
	snap := l.Snapshot().Served()
	m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	learned, err := RunFloor(m, x, rows, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("learned: model %.3g, floor %.3g, gap %.3g; eigenvalues %.3g (floor) %.3g (exact)", learned.ModelError, learned.FloorError, learned.LearnerGap, learned.FloorEigenvalues, learned.ExactEigenvalues)
	// --top: the first components against exact kernel PCA's top ones;
	// their eigenvalues are the first of all k.
	first, err := RunFloor(m, x, rows, k-1)
	if err != nil {
		t.Fatal(err)
	}
	if first.K != k-1 || first.ModelK != k || len(first.FloorEigenvalues) != k-1 || math.Abs(first.ExactEigenvalues[0]/learned.ExactEigenvalues[0]-1) > 1e-9 {
		t.Errorf("--top %d: k %d of %d, %d floor eigenvalues, exact λ₁ %v against %v", k-1, first.K, first.ModelK, len(first.FloorEigenvalues), first.ExactEigenvalues[0], learned.ExactEigenvalues[0])
	}
	if _, err := RunFloor(m, x, rows, k+1); err == nil {
		t.Error("--top past the model's components accepted")
	}
	for q := range k { // 256 features of a 3-D gaussian kernel: its spectrum, within a few per cent
		if r := learned.FloorEigenvalues[q] / learned.ExactEigenvalues[q]; math.Abs(r-1) > 0.1 {
			t.Errorf("eigenvalue %d: the features' %.4g, exact %.4g", q, learned.FloorEigenvalues[q], learned.ExactEigenvalues[q])
		}
	}

	// Φ (rows × F) of the model's own blocks, centred, and its SVD.
	h := snap.Header
	fm := m.Map(0)
	seeds, _ := h.ViewSeeds(0)
	nb, f := fm.BlockSize, len(seeds)*fm.BlockSize
	phi := mat.NewDense(rows, f, nil)
	xs := make([]float64, len(x))
	h.Views[0].Preprocess.Apply(xs, x)
	blockPhi := make([]float64, rows*nb)
	z := make([]float64, fm.ScratchLen())
	var blk features.Block
	for j, s := range seeds {
		fm.Generate(&blk, s)
		fm.PhiTo(blockPhi, z, xs, rows, &blk)
		for r := range rows {
			for c := range nb {
				phi.Set(r, j*nb+c, blockPhi[r*nb+c])
			}
		}
	}
	for c := range f {
		col := phi.ColView(c)
		mean := mat.Sum(col) / rows
		for r := range rows {
			phi.Set(r, c, phi.At(r, c)-mean)
		}
	}
	var svd mat.SVD
	if !svd.Factorize(phi, mat.SVDThin) {
		t.Fatal("SVD failed")
	}
	var v mat.Dense
	svd.VTo(&v)
	// The block layout of the coefficients: block j's nb×k, feature-major.
	coef := make([]float64, f*k)
	for c := range f {
		for q := range k {
			coef[c*k+q] = v.At(c, q)
		}
	}
	snap.Coef[0] = coef
	snap.Header.Views[0].Center = make([]float64, k) // set below: the projections' mean
	m0, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := m0.Project(nil, x)
	for q := range k {
		var s float64
		for r := range rows {
			s += vals[r*k+q]
		}
		snap.Header.Views[0].Center[q] = s / rows
	}
	exactFloor, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunFloor(exactFloor, x, rows, 0)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.ModelError-res.FloorError) > 1e-9+1e-6*res.FloorError || math.Abs(res.LearnerGap-1) > 1e-4 {
		t.Errorf("a model set to its features' exact PCA: error %.6g, floor %.6g (gap %.6g); want them equal", res.ModelError, res.FloorError, res.LearnerGap)
	}
	for q := range k {
		want := svd.Values(nil)[q] * svd.Values(nil)[q] / rows / float64(len(seeds))
		if got := res.FloorEigenvalues[q]; math.Abs(got-want) > 1e-9*want {
			t.Errorf("floor eigenvalue %d: %.9g; the SVD's %.9g", q, got, want)
		}
	}
}
