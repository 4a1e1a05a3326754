package bench

import (
	"errors"
	"fmt"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/snapshot"
)

// FloorResult is `streamkpca bench floor`'s report: how far a model is
// from exact kernel PCA of some rows, split into the two gaps a user can
// act on — the learner's, from the best its own features allow (the
// floor: exact PCA of those features on the rows), and the features',
// from exact kernel PCA.
type FloorResult struct {
	Bench string `json:"bench"`
	Rows  int    `json:"rows"`
	Dim   int    `json:"dim"`
	K     int    `json:"k"`
	// ModelK is the model's components; K (top, when given) of them are
	// compared: a model learned with more components than wanted (an
	// oversampled subspace) is judged on its first K.
	ModelK    int     `json:"model_k"`
	Features  int     `json:"features"`
	Centered  bool    `json:"centered"`
	Bandwidth float64 `json:"bandwidth"`
	// ModelError and FloorError: 1 − cos²θ_max between the top-k span of
	// the model's (or the floor's) values on the rows and exact kernel
	// PCA's. LearnerGap = ModelError / FloorError.
	ModelError float64 `json:"model_error"`
	FloorError float64 `json:"floor_error"`
	LearnerGap float64 `json:"learner_gap"`
	// The floor's top-k eigenvalues (of the features' covariance on the
	// rows, over the number of blocks: each block approximates the kernel
	// on its own) and exact kernel PCA's (of the kernel's centred Gram / n).
	FloorEigenvalues []float64 `json:"floor_eigenvalues"`
	ExactEigenvalues []float64 `json:"exact_eigenvalues"`
	Seconds          float64   `json:"seconds"`
}

// RunFloor measures model m on rows (rows×d, m's inputs before its
// preprocessing) against exact kernel PCA of them at m's kernel, and
// against the floor of m's own features: the exact top-k PCA of the
// features' values on the rows (centred where m is), from their n×n Gram
// matrix summed block by block (O(n²·features): a few thousand rows).
// Both are scored on the rows themselves. One view, random features.
// top > 0 compares the model's first top components with exact kernel
// PCA's top (0: all of them).
func RunFloor(m *snapshot.Model, x []float64, rows, top int) (FloorResult, error) {
	start := time.Now()
	h := m.Header()
	if len(h.Views) != 1 {
		return FloorResult{}, errors.New("bench floor: a one-view model (kpca or gha)")
	}
	v := h.Views[0]
	fm := m.Map(0)
	if fm.Landmarks {
		return FloorResult{}, errors.New("bench floor: the model's features are landmarks (rows of its data): its floor is exact kernel PCA on them; use a model of random features")
	}
	d, kModel := v.Dim, h.K
	if top < 0 || top > kModel {
		return FloorResult{}, fmt.Errorf("bench floor: --top %d: the model has %d components", top, kModel)
	}
	k := kModel
	if top > 0 {
		k = top // the model's first top components against exact kernel PCA's top
	}
	if rows < 2*k || len(x) < rows*d {
		return FloorResult{}, fmt.Errorf("bench floor: %d rows of %d values; need at least %d", len(x)/max(d, 1), d, 2*k)
	}
	x = x[:rows*d]
	centred := len(v.Center) == kModel
	res := FloorResult{Bench: "floor", Rows: rows, Dim: d, K: k, ModelK: kModel, Features: h.Features(), Centered: centred, Bandwidth: v.Kernel.Bandwidth}
	xs := make([]float64, len(x))
	v.Preprocess.Apply(xs, x)

	// Exact kernel PCA of the rows, at the model's kernel.
	exact, err := baseline.NewExact(v.Kernel, d, k, rows)
	if err != nil {
		return res, err
	}
	exact.Center = centred
	exact.Observe(xs, rows)
	if err := exact.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
		return res, fmt.Errorf("bench floor: exact kernel PCA: %w", err)
	}
	truthV := make([]float64, rows*k)
	exact.Eval(truthV, xs, rows)
	truth := mat.NewDense(rows, k, truthV)
	// On the rows themselves the values are K̃U = UΛ: column q's norm is
	// λ_q, the covariance operator's eigenvalue times n.
	for q := range k {
		res.ExactEigenvalues = append(res.ExactEigenvalues, mat.Norm(truth.ColView(q), 2)/float64(rows))
	}

	// The model.
	got, err := m.Project(nil, x)
	if err != nil {
		return res, err
	}
	var first mat.Dense
	first.CloneFrom(mat.NewDense(rows, kModel, got).Slice(0, rows, 0, k))
	res.ModelError = synth.SubspaceError(&first, truth)

	// The floor: G = Σ_blocks φ_b φ_bᵀ over the model's blocks, centred.
	seeds, _ := h.ViewSeeds(0)
	nb := fm.BlockSize
	g := blas64.Symmetric{N: rows, Stride: rows, Data: make([]float64, rows*rows), Uplo: blas.Lower}
	phi := make([]float64, rows*nb)
	z := make([]float64, fm.ScratchLen())
	var blk features.Block
	for _, seed := range seeds {
		fm.Generate(&blk, seed)
		fm.PhiTo(phi, z, xs, rows, &blk)
		blas64.Syrk(blas.NoTrans, 1, blas64.General{Rows: rows, Cols: nb, Stride: nb, Data: phi}, 1, g)
	}
	full := g.Data // both triangles, for the eigensolver
	for i := range rows {
		for j := 0; j < i; j++ {
			full[j*rows+i] = full[i*rows+j]
		}
	}
	if centred {
		centreGram(full, rows)
	}
	vecs, err := baseline.TopEigenvectors(full, rows, k)
	if vecs == nil {
		return res, fmt.Errorf("bench floor: the features' Gram matrix: %w", err)
	}
	// Rayleigh quotients: the floor's eigenvalues, over the blocks (each
	// block's features approximate the kernel on their own).
	gm := mat.NewDense(rows, rows, full)
	var gv mat.VecDense
	for q := range k {
		col := vecs.ColView(q)
		gv.MulVec(gm, col)
		res.FloorEigenvalues = append(res.FloorEigenvalues, mat.Dot(col, &gv)/mat.Dot(col, col)/float64(rows)/float64(len(seeds)))
	}
	res.FloorError = synth.SubspaceError(vecs, truth)
	if res.FloorError > 0 {
		res.LearnerGap = res.ModelError / res.FloorError
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// centreGram replaces the n×n Gram matrix g (full storage) by HGH
// (H = I − 11ᵀ/n): the Gram of the centred vectors.
func centreGram(g []float64, n int) {
	row := make([]float64, n)
	var all float64
	for i := range n {
		for _, v := range g[i*n : (i+1)*n] {
			row[i] += v
		}
		all += row[i]
		row[i] /= float64(n)
	}
	all /= float64(n * n)
	for i := range n {
		for j := range n {
			g[i*n+j] += all - row[i] - row[j]
		}
	}
}
