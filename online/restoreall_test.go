package online

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// restorable is what KPCA and TwoView share for these tests.
type restorable interface {
	Config() Config
	Snapshot() *snapshot.Snapshot
	Close()
}

// keptAfterRestore checks that the setting name of l's Config comes back
// unchanged from l's snapshot through restore; it closes l.
func keptAfterRestore(t *testing.T, name string, l restorable, restore func(*snapshot.Snapshot) (restorable, error)) {
	t.Helper()
	want := reflect.ValueOf(l.Config()).FieldByName(name).Interface()
	snap := l.Snapshot()
	l.Close()
	r, err := restore(snap)
	if err != nil {
		t.Fatalf("%s: restore: %v", name, err)
	}
	defer r.Close()
	if got := reflect.ValueOf(r.Config()).FieldByName(name).Interface(); !reflect.DeepEqual(got, want) {
		t.Errorf("Config.%s: %v learned, %v after a restore", name, want, got)
	}
}

// TestRestoreKeepsEveryModelSetting (issue 46): every field of Config is
// either a runtime setting (taken from Restore's rt), a two-view one
// (NewTwoView, RestoreTwoView), or part of the model, and a model setting
// given a value other than its default comes back from a snapshot
// unchanged. The fields are walked by reflection: a field added to Config
// without a line here fails the test, so a setting Restore forgets
// cannot silently reset on restart.
func TestRestoreKeepsEveryModelSetting(t *testing.T) {
	twoView := map[string]bool{"KernelY": true, "DimY": true, "Uncentered": true, "Slices": true}
	// A value other than the default for each model setting, with what
	// else the value needs; d is the inputs' dimension.
	type change struct {
		set func(*Config)
		d   int
	}
	model := map[string]change{
		"Model":       {set: func(c *Config) { c.Model = "other" }},
		"Incarnation": {set: func(c *Config) { c.Incarnation = "inc-7" }},
		"Algorithm":   {set: func(c *Config) { c.Algorithm = AlgGHA; c.Solver = SolverOja }},
		"K":           {set: func(c *Config) { c.K = 2 }},
		"Oversample":  {set: func(c *Config) { c.Oversample = 5 }},
		"Dim":         {set: func(c *Config) { c.Dim = 6 }},
		"Kernel":      {set: func(c *Config) { c.Kernel = features.Kernel{Family: features.Laplacian, Bandwidth: 2.5} }},
		"BlockSize":   {set: func(c *Config) { c.BlockSize = 32 }},
		"MaxFeatures": {set: func(c *Config) { c.MaxFeatures = 96 }},
		"Solver":      {set: func(c *Config) { c.Solver = SolverOja }},
		"Ridge":       {set: func(c *Config) { c.Solver, c.Ridge = SolverCovariance, 0.1 }},
		"Theta0":      {set: func(c *Config) { c.Theta0 = 0.7 }},
		"Theta1":      {set: func(c *Config) { c.Theta1 = 0.2 }},
		"Average":     {set: func(c *Config) { c.Average = 0.6 }},
		"Seed":        {set: func(c *Config) { c.Seed = 99 }},
		"Standardize": {set: func(c *Config) { c.Standardize = true }},
		"Center":      {set: func(c *Config) { c.Center = true }},
		"Precision":   {set: func(c *Config) { c.Precision = Float32 }},
		"Compute":     {set: func(c *Config) { c.Compute = ComputeBLAS }},
		"Frequencies": {set: func(c *Config) { c.Frequencies = FrequenciesOrthogonal }, d: 16},
		"Features":    {set: func(c *Config) { c.Features = FeaturesLandmarks }},
	}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		name := ct.Field(i).Name
		_, isModel := model[name]
		if !isModel && ct.Field(i).Tag.Get("setting") == "" && !twoView[name] {
			t.Errorf("Config.%s is not listed here: say whether it is a runtime, a two-view or a model setting (and make Restore keep it)", name)
			continue
		}
		if !isModel {
			continue
		}
		ch := model[name]
		d := max(ch.d, 6)
		cfg := Config{K: 3, BlockSize: 32, MaxFeatures: 128, Frequencies: FrequenciesIID, Forget: ForgetOff}
		ch.set(&cfg)
		rng := rand.New(rand.NewPCG(3, uint64(i)))
		x := make([]float64, 64*d)
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		l, err := New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for range 3 {
			if err := l.Update(x, 64); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		keptAfterRestore(t, name, l, func(s *snapshot.Snapshot) (restorable, error) { return Restore(s, Config{Forget: ForgetOff}) })
	}
	l, err := New(Config{K: 2, BlockSize: 32, MaxFeatures: 64, Forget: ForgetOff})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, 64*4)
	for j := range x {
		x[j] = float64(j%5) - 2
	}
	if err := l.Update(x, 64); err != nil {
		t.Fatal(err)
	}
	takesRuntime(t, l, func(s *snapshot.Snapshot, rt Config) (restorable, error) { return Restore(s, rt) })
}

// takesRuntime checks that a learner restored from l's snapshot takes
// every runtime and group setting (Config's `setting` tags) from the
// restoring process's Config, not from the snapshot nor a default; it
// closes l. The fields are walked by their tags: a setting tagged
// without a value here fails the test.
func takesRuntime(t *testing.T, l restorable, restore func(*snapshot.Snapshot, Config) (restorable, error)) {
	t.Helper()
	values := map[string]any{"Workers": 3, "CacheBytes": int64(5 << 20), "KeepBytes": int64(-1), "Forget": ForgetDetect, "FollowAlpha": 0.05}
	var rt Config
	rv := reflect.ValueOf(&rt).Elem()
	ct := rv.Type()
	for i := range ct.NumField() {
		if ct.Field(i).Tag.Get("setting") == "" {
			continue
		}
		v, ok := values[ct.Field(i).Name]
		if !ok {
			t.Errorf("Config.%s is tagged %q: give it a value other than its default here", ct.Field(i).Name, ct.Field(i).Tag.Get("setting"))
			continue
		}
		rv.Field(i).Set(reflect.ValueOf(v))
	}
	snap := l.Snapshot()
	l.Close()
	r, err := restore(snap, rt)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	defer r.Close()
	got := reflect.ValueOf(r.Config())
	for name, want := range values {
		if g := got.FieldByName(name).Interface(); g != want {
			t.Errorf("Config.%s: %v after a restore, want the restoring process's %v", name, g, want)
		}
	}
}

// TestRestoreTwoViewKeepsEveryModelSetting is the same walk for
// NewTwoView and RestoreTwoView (kcca; ksir for its slices).
func TestRestoreTwoViewKeepsEveryModelSetting(t *testing.T) {
	oneView := map[string]bool{"Center": true, "Average": true, "Oversample": true} // ignored by (refused for) the two-view algorithms
	type change struct{ set func(*Config) }
	model := map[string]change{
		"Model":       {func(c *Config) { c.Model = "other" }},
		"Incarnation": {func(c *Config) { c.Incarnation = "inc-7" }},
		"Algorithm":   {func(c *Config) { c.Algorithm = AlgKSVD }},
		"K":           {func(c *Config) { c.K = 2 }},
		"Dim":         {func(c *Config) { c.Dim = 6 }},
		"Kernel":      {func(c *Config) { c.Kernel = features.Kernel{Family: features.Laplacian, Bandwidth: 2.5} }},
		"KernelY":     {func(c *Config) { c.KernelY = features.Kernel{Family: features.Cauchy, Bandwidth: 1.5} }},
		"DimY":        {func(c *Config) { c.DimY = 5 }},
		"BlockSize":   {func(c *Config) { c.BlockSize = 32 }},
		"MaxFeatures": {func(c *Config) { c.MaxFeatures = 96 }},
		"Solver":      {func(c *Config) { c.Solver = SolverOja }},
		"Ridge":       {func(c *Config) { c.Ridge = 0.1 }},
		"Theta0":      {func(c *Config) { c.Solver, c.Theta0 = SolverOja, 0.7 }},
		"Theta1":      {func(c *Config) { c.Solver, c.Theta1 = SolverOja, 0.2 }},
		"Seed":        {func(c *Config) { c.Seed = 99 }},
		"Standardize": {func(c *Config) { c.Standardize = true }},
		"Uncentered":  {func(c *Config) { c.Solver, c.Uncentered = SolverOja, true }},
		"Slices":      {func(c *Config) { c.Algorithm, c.Slices = AlgKSIR, 4 }},
		"Precision":   {func(c *Config) { c.Precision = Float32 }},
		"Compute":     {func(c *Config) { c.Compute = ComputeBLAS }},
		"Frequencies": {func(c *Config) { c.Frequencies = FrequenciesOrthogonal }},
		"Features":    {func(c *Config) { c.Features = FeaturesLandmarks }},
	}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		name := ct.Field(i).Name
		ch, isModel := model[name]
		if !isModel && ct.Field(i).Tag.Get("setting") == "" && !oneView[name] {
			t.Errorf("Config.%s is not listed here: say whether it is a runtime, a one-view or a two-view model setting (and make RestoreTwoView keep it)", name)
			continue
		}
		if !isModel {
			continue
		}
		cfg := Config{Algorithm: AlgKCCA, K: 3, BlockSize: 32, MaxFeatures: 128, Frequencies: FrequenciesIID, Forget: ForgetOff}
		ch.set(&cfg)
		const d, dy, rows = 16, 5, 64
		rng := rand.New(rand.NewPCG(5, uint64(i)))
		x, y := make([]float64, rows*d), make([]float64, rows*dy)
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		for r := range rows {
			for c := range dy {
				y[r*dy+c] = x[r*d+c] + 0.3*rng.NormFloat64()
			}
		}
		if cfg.Algorithm == AlgKSIR {
			y = y[:0]
			for r := range rows {
				y = append(y, x[r*d]+0.1*rng.NormFloat64())
			}
		}
		if name == "Dim" {
			x = x[:rows*6]
			for r := range rows {
				for c := range 6 {
					x[r*6+c] = rng.NormFloat64()
				}
			}
		}
		l, err := NewTwoView(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for range 3 {
			if err := l.Update(x, y, rows); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		keptAfterRestore(t, name, l, func(s *snapshot.Snapshot) (restorable, error) { return RestoreTwoView(s, Config{Forget: ForgetOff}) })
	}
	l, err := NewTwoView(Config{Algorithm: AlgKCCA, K: 2, BlockSize: 32, MaxFeatures: 64, Forget: ForgetOff})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, 64*3)
	for j := range x {
		x[j] = float64(j%7) - 3
	}
	if err := l.Update(x, x, 64); err != nil {
		t.Fatal(err)
	}
	takesRuntime(t, l, func(s *snapshot.Snapshot, rt Config) (restorable, error) { return RestoreTwoView(s, rt) })
}

// Defect (issue 58, item 10): a two-view model was restored with one
// frequency setting for both views, the x view's: x at d = 40 draws
// structured orthogonal frequencies under auto, y at d_y = 20 i.i.d.,
// and the restore drew y's blocks structured, so its functions came back
// different (by up to 2.34). Now each view is restored as stored: both
// views' functions equal the learned ones on the same rows, to rounding.
func TestTwoViewRestoresEachViewsFrequencies(t *testing.T) {
	const d, dy, rows = 40, 20, 128
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float64, rows*d), make([]float64, rows*dy)
	for j := range x {
		x[j] = rng.NormFloat64()
	}
	for r := range rows {
		for c := range dy {
			y[r*dy+c] = x[r*d+c] + 0.3*rng.NormFloat64()
		}
	}
	l, err := NewTwoView(Config{Algorithm: AlgKCCA, K: 3, BlockSize: 64, MaxFeatures: 256, Forget: ForgetOff})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 4 {
		if err := l.Update(x, y, rows); err != nil {
			t.Fatal(err)
		}
	}
	snap := l.Snapshot()
	if !snap.Header.Views[0].Structured() || snap.Header.Views[1].Structured() {
		t.Fatalf("views drawn structured %v, %v; the test needs x structured and y i.i.d.", snap.Header.Views[0].Structured(), snap.Header.Views[1].Structured())
	}
	r, err := RestoreTwoView(snap, Config{Forget: ForgetOff})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if f := r.Config().Frequencies; f != FrequenciesAuto {
		t.Errorf("restored learner.frequencies %q; want auto (what drew both views)", f)
	}
	for i, in := range [][]float64{x, y} {
		want, got := make([]float64, rows*3), make([]float64, rows*3)
		l.EvalTo(i, want, in, rows)
		r.EvalTo(i, got, in, rows)
		worst := 0.0
		for j := range want {
			worst = max(worst, math.Abs(want[j]-got[j]))
		}
		if worst > 1e-9 {
			t.Errorf("view %d: the restored functions differ from the learned ones by up to %.3g", i, worst)
		}
	}
}
