package configs

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/settingtest"
	"github.com/streamkpca/streamkpca/online"
)

// TestExampleIsTheDefault: configs/streamkpca.yaml documents the defaults;
// loading it must give exactly Default().
func TestExampleIsTheDefault(t *testing.T) {
	c, err := Load("streamkpca.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := Default(); !reflect.DeepEqual(c, d) {
		t.Errorf("example file differs from the defaults:\n file %+v\n want %+v", c, d)
	}
}

// TestExampleIsGenerated: configs/streamkpca.yaml is what the settings'
// declarations generate (Example): a setting added, or its default or
// doc changed, in config.go without go generate fails here, in CI.
func TestExampleIsGenerated(t *testing.T) {
	file, err := os.ReadFile("streamkpca.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := Example(); string(file) != string(want) {
		fl, wl := strings.Split(string(file), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(fl), len(wl)) {
			if fl[i] != wl[i] {
				t.Fatalf("configs/streamkpca.yaml is not what config.go generates (run go generate ./configs); line %d:\n file %q\n want %q", i+1, fl[i], wl[i])
			}
		}
		t.Fatalf("configs/streamkpca.yaml has %d lines, config.go generates %d (run go generate ./configs)", len(fl), len(wl))
	}
}

func TestEnvOverrides(t *testing.T) {
	c, err := Load("", []string{
		"STREAMKPCA_LEARNER_K=7", "STREAMKPCA_KAFKA_BROKERS=a:1, b:2", "STREAMKPCA_SNAPSHOT_EVERY=1m",
		"STREAMKPCA_LEARNER_CENTER=true", "STREAMKPCA_LEARNER_SEED=9", "PATH=/bin",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Learner.K != 7 || !slices.Equal(c.Kafka.Brokers, []string{"a:1", "b:2"}) ||
		c.Snapshot.Every != time.Minute || !c.Learner.Center || c.Learner.Seed != 9 {
		t.Errorf("overrides not applied: %+v", c)
	}
	if _, err := Load("", []string{"STREAMKPCA_LEARNER_KAY=1"}); err == nil || !strings.Contains(err.Error(), "STREAMKPCA_LEARNER_KAY") {
		t.Errorf("unknown variable: %v", err)
	}
	if _, err := Load("", []string{"STREAMKPCA_LEARNER_K=x"}); err == nil {
		t.Error("non-numeric k accepted")
	}
	// Defect: the documented variables that are not settings
	// (STREAMKPCA_NO_AVX512, the Python client's and its tests') stopped
	// `run` with "no such setting".
	env := []string{"STREAMKPCA_LEARNER_K=3"}
	for _, v := range OtherVariables {
		env = append(env, v+"=1")
	}
	if c, err := Load("", env); err != nil || c.Learner.K != 3 || len(OtherVariables) < 6 {
		t.Errorf("variables that are not settings: %v", err)
	}
}

func TestFlagOverrides(t *testing.T) {
	c, err := Load("", []string{"STREAMKPCA_LEARNER_K=7"}, "learner.k=9", "kafka.topic=t2", "learner.kernel=laplacian")
	if err != nil {
		t.Fatal(err)
	}
	if c.Learner.K != 9 || c.Kafka.Topic != "t2" || c.Learner.Kernel != "laplacian" {
		t.Errorf("flags did not override: k=%d topic=%s kernel=%s", c.Learner.K, c.Kafka.Topic, c.Learner.Kernel)
	}
	for _, bad := range []string{"learner.kk=1", "nokey", "learner.k=x"} {
		if _, err := Load("", nil, bad); err == nil {
			t.Errorf("--set %s accepted", bad)
		}
	}
}

func TestValidateNamesFields(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte("learner:\n  k: -1\n  algorithm: pca\n  precision: float16\n  compute: gpu\nkafka:\n  format: xml\n  brokers: [nohost]\n"), 0o644)
	_, err := Load(p, nil)
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, field := range []string{"learner.k", "learner.algorithm", "learner.precision", "learner.compute", "kafka.format", "kafka.brokers[0]"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	os.WriteFile(p, []byte("learner:\n  kk: 1\n"), 0o644)
	if _, err := Load(p, nil); err == nil {
		t.Error("unknown YAML field accepted")
	}
}

func TestSecretFromFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	os.WriteFile(p, []byte("hunter2\n"), 0o600)
	if s, err := Secret("http.token", "", p); err != nil || s != "hunter2" {
		t.Errorf("Secret = %q, %v", s, err)
	}
	if s, _ := Secret("http.token", "inline", p); s != "inline" {
		t.Errorf("inline secret not preferred: %q", s)
	}
}

// Defect: an empty or whitespace token file switched authentication off.
// Such a file, or a missing one, is an error naming the setting.
func TestSecretFileUnusable(t *testing.T) {
	dir := t.TempDir()
	blank := filepath.Join(dir, "blank")
	os.WriteFile(blank, []byte(" \n\t\n"), 0o600)
	for _, f := range []string{blank, filepath.Join(dir, "missing")} {
		s, err := Secret("http.token", "", f)
		if err == nil || !strings.Contains(err.Error(), "http.token_file") {
			t.Errorf("Secret(%s) = %q, %v; want an error naming http.token_file", f, s, err)
		}
	}
}

// Defect: a two-view algorithm with a non-JSON format started and then hung
// at shutdown; bad queue bounds were accepted. Validate names each field.
func TestValidateRejectsUnrunnableCombinations(t *testing.T) {
	for _, tc := range []struct {
		set   []string
		field string
	}{
		{[]string{"learner.algorithm=kcca", "kafka.format=csv"}, "kafka.format"},
		{[]string{"learner.algorithm=ksir", "kafka.format=f32le"}, "kafka.format"},
		{[]string{"kafka.queue_size=-1"}, "kafka.queue_size"},
		{[]string{"kafka.queue_bytes=-5"}, "kafka.queue_bytes"},
		{[]string{"kafka.max_abs=-1"}, "kafka.max_abs"},
		{[]string{"kafka.fetch_max_wait=1ms"}, "kafka.fetch_max_wait"},
		{[]string{"learner.batch=100000000000"}, "learner.batch"},
		{[]string{"kafka.dim=1000000000"}, "kafka.dim"},
		{[]string{"learner.workers=-2"}, "learner.workers"},
		{[]string{"learner.cache_bytes=-1"}, "learner.cache_bytes"},
		{[]string{"learner.linger=-1s"}, "learner.linger"},
		{[]string{"nats.keep=-1"}, "nats.keep"},
		{[]string{"nats.replicas=7"}, "nats.replicas"},
		{[]string{"nats.replicas=-1"}, "nats.replicas"},
		{[]string{"http.max_vectors=-1"}, "http.max_vectors"},
		{[]string{"http.addr=:8080"}, "http.addr"}, // every interface, no token
		{[]string{"http.addr=0.0.0.0:9000"}, "http.addr"},
		{[]string{"learner.algorithm=ksir", "learner.features=landmarks"}, "learner.features"},
		{[]string{"learner.features=nystrom"}, "learner.features"},
	} {
		_, err := Load("", nil, tc.set...)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%v: %v, want an error naming %s", tc.set, err, tc.field)
		}
	}
}

// FuzzLoad: any YAML file and any --set value either loads into a valid
// configuration or fails with an error; it never panics.
func FuzzLoad(f *testing.F) {
	f.Add("learner:\n  k: 5\n", "kafka.dim=3")
	f.Add("kafka:\n  brokers: [a:1]\n  queue_bytes: -1\n", "learner.batch=1e11")
	f.Add("http: {addr: off}\nnats: {keep: 0}\n", "learner.linger=1h")
	f.Add("learner: [1, 2]\n", "=")
	f.Fuzz(func(t *testing.T, yaml, set string) {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, nil, set)
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Load accepted a configuration Validate refuses: %v", verr)
			}
		}
	})
}

// The default HTTP address is loopback; beyond it a token or an explicit
// allow_unauthenticated is needed.
func TestHTTPAddrFailsClosed(t *testing.T) {
	c, err := Load("", nil)
	if err != nil || c.HTTP.Addr != "127.0.0.1:8080" {
		t.Fatalf("default http.addr %q (%v), want 127.0.0.1:8080", c.HTTP.Addr, err)
	}
	for _, set := range [][]string{
		{"http.addr=:8080", "http.token=s3cret"},
		{"http.addr=:8080", "http.allow_unauthenticated=true"},
		{"http.addr=[::1]:8080"},
		{"http.addr=localhost:0"},
		{"http.addr=off"},
	} {
		if _, err := Load("", nil, set...); err != nil {
			t.Errorf("%v: %v", set, err)
		}
	}
}

// Defect: a bad --set key was reported as an environment variable.
func TestBadSetNamedAsFlag(t *testing.T) {
	_, err := Load("", nil, "learner.kk=3")
	if err == nil || !strings.Contains(err.Error(), "--set learner.kk") || strings.Contains(err.Error(), "STREAMKPCA_") {
		t.Errorf("Load: %v, want an error naming --set learner.kk", err)
	}
	_, err = Load("", []string{"STREAMKPCA_LEARNER_KK=3"})
	if err == nil || !strings.Contains(err.Error(), "STREAMKPCA_LEARNER_KK") {
		t.Errorf("Load: %v, want an error naming the variable", err)
	}
}

// Defect: an explicit 0 for k, block, batch or snapshot.keep silently
// became the default. It is an error naming where it came from.
func TestExplicitZeroRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("learner:\n  k: 0\n"), 0o600)
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), "learner.k") || !strings.Contains(err.Error(), p) {
		t.Errorf("k: 0 in a file: %v", err)
	}
	if _, err := Load("", []string{"STREAMKPCA_SNAPSHOT_KEEP=0"}); err == nil || !strings.Contains(err.Error(), "STREAMKPCA_SNAPSHOT_KEEP") {
		t.Errorf("snapshot.keep=0 in the environment: %v", err)
	}
	if _, err := Load("", nil, "learner.batch=0"); err == nil || !strings.Contains(err.Error(), "--set learner.batch") {
		t.Errorf("--set learner.batch=0: %v", err)
	}
	if _, err := Load("", nil, "kafka.fetch_max_wait=0s"); err == nil || !strings.Contains(err.Error(), "--set kafka.fetch_max_wait") {
		t.Errorf("--set kafka.fetch_max_wait=0s: %v", err)
	}
	// 0 stays meaningful where it is documented: dim, bandwidth, theta.
	if _, err := Load("", nil, "kafka.dim=0", "learner.bandwidth=0", "learner.theta0=0"); err != nil {
		t.Errorf("documented zeros refused: %v", err)
	}
}

// TestLandmarksForEveryAlgorithmButKSIR: landmark features load for kpca,
// gha, ksvd and kcca; kpca, gha and kcca then default to the covariance
// solver and its budget (2,048, per view for kcca), ksvd to the landmark
// feature budget (4,096).
func TestLandmarksForEveryAlgorithmButKSIR(t *testing.T) {
	for _, alg := range []string{"kpca", "gha", "ksvd", "kcca"} {
		c, err := Load("", nil, "learner.algorithm="+alg, "learner.features=landmarks", "kafka.format=json")
		if err != nil {
			t.Errorf("%s with landmarks: %v", alg, err)
			continue
		}
		want, solver := 2048, "covariance"
		if alg == "ksvd" {
			want, solver = 4096, "oja"
		}
		if c.Learner.MaxFeatures != want || c.Learner.Solver != solver {
			t.Errorf("%s with landmarks: max_features %d, solver %q; want %d, %q", alg, c.Learner.MaxFeatures, c.Learner.Solver, want, solver)
		}
	}
}

// TestCovarianceSolver: kcca defaults to the covariance solver with its
// budget and its ridge chosen on held-out pairs (0); kpca and gha take it
// on request, with the ridge 0.01; it is refused for
// ksvd and ksir and past its feature bound, and a non-positive ridge is
// refused.
func TestCovarianceSolver(t *testing.T) {
	c, err := Load("", nil, "learner.algorithm=kcca", "kafka.format=json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Learner.Solver != "covariance" || c.Learner.MaxFeatures != 2048 || c.Learner.Block != 512 || c.Learner.Ridge != 0 {
		t.Errorf("kcca defaults: solver %q, max_features %d, block %d, ridge %v", c.Learner.Solver, c.Learner.MaxFeatures, c.Learner.Block, c.Learner.Ridge)
	}
	for _, set := range [][]string{
		{"learner.algorithm=ksvd", "learner.solver=covariance", "kafka.format=json"},
		{"learner.algorithm=ksir", "learner.solver=covariance", "kafka.format=json"},
		{"learner.algorithm=kpca", "learner.solver=covariance", "learner.max_features=16384"},
		{"learner.algorithm=kcca", "learner.max_features=16384", "kafka.format=json"},
		{"learner.algorithm=kcca", "learner.ridge=-1", "kafka.format=json"},
	} {
		if _, err := Load("", nil, set...); err == nil {
			t.Errorf("%v accepted", set)
		}
	}
	for _, alg := range []string{"kpca", "gha"} {
		if c, err := Load("", nil, "learner.algorithm="+alg, "learner.solver=covariance"); err != nil || c.Learner.MaxFeatures != 2048 || c.Learner.Features != "random" || c.Learner.Ridge != 0.01 {
			t.Errorf("%s with the covariance solver: %v, max_features %d, features %q", alg, err, c.Learner.MaxFeatures, c.Learner.Features)
		}
	}
	if c, err := Load("", nil, "learner.algorithm=kcca", "learner.solver=oja", "kafka.format=json"); err != nil || c.Learner.MaxFeatures != 32768 {
		t.Errorf("kcca with the paper's rule: %v, max_features %d", err, c.Learner.MaxFeatures)
	}
}

// TestLearnerFlags: every learner setting but linger has a flag named
// after its YAML key, with the example file's description and the
// default; the flags given become Load overrides that validate like
// --set, and "auto" bandwidths leave the median trick.
func TestLearnerFlags(t *testing.T) {
	fs := flag.NewFlagSet("fit", flag.ContinueOnError)
	sets := LearnerFlags(fs)
	for _, name := range []string{"algorithm", "algo", "k", "kernel", "bandwidth", "coefficients", "kernel-y", "bandwidth-y",
		"batch", "block", "max-features", "features", "solver", "theta0", "theta1", "seed", "center", "standardize",
		"precision", "compute", "workers", "cache-bytes", "uncentered", "slices"} {
		f := fs.Lookup(name)
		if f == nil || f.Usage == "" {
			t.Errorf("--%s: missing or undocumented (%v)", name, f)
		}
	}
	if fs.Lookup("linger") != nil {
		t.Error("--linger registered: it is the service's batching, not the learner's")
	}
	if f := fs.Lookup("max-features"); f == nil || f.DefValue != "32768" {
		t.Errorf("--max-features default %q, want 32768", f.DefValue)
	}
	if u := fs.Lookup("algorithm").Usage; !strings.Contains(u, "kcca (Alg. 4)") {
		t.Errorf("--algorithm usage %q lost its continued comment", u)
	}
	if err := fs.Parse([]string{"--algo", "gha", "--k", "4", "--bandwidth", "auto", "--center", "--max-features", "1024"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"learner.algorithm=gha", "learner.k=4", "learner.center=true", "learner.max_features=1024"}
	if got := sets(); !slices.Equal(got, want) {
		t.Fatalf("overrides %q, want %q", got, want)
	}
	c, err := Load("", nil, sets()...)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Learner.Online("m", 0)
	if o.Algorithm != "gha" || o.K != 4 || !o.Center || o.MaxFeatures != 1024 || o.Kernel.Bandwidth != 0 || o.BlockSize != 512 {
		t.Errorf("learner config %+v", o)
	}
	if _, err := Load("", nil, "learner.k=0"); err == nil || !strings.Contains(err.Error(), "learner.k") {
		t.Errorf("k=0: %v, want an error naming learner.k", err)
	}
}

// TestEnumerationsAreTheLearners: the values a learner setting accepts are
// online's lists, stated there once: each is accepted under its YAML name,
// and a value outside them is refused with the list.
func TestEnumerationsAreTheLearners(t *testing.T) {
	lists := map[string][]string{
		"algorithm": strs(online.Algorithms), "solver": strs(online.Solvers), "features": strs(online.FeatureSources),
		"precision": strs(online.Precisions), "compute": strs(online.Computes),
	}
	for key, values := range lists {
		field := "learner." + key
		for _, v := range values {
			_, err := Load("", nil, field+"="+v)
			if err != nil && strings.Contains(err.Error(), field+": ") && strings.Contains(err.Error(), "want") {
				t.Errorf("%s=%s refused as not one of the values: %v", field, v, err)
			}
		}
		_, err := Load("", nil, field+"=nonsense")
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), values[len(values)-1]) {
			t.Errorf("%s=nonsense: %v, want an error naming the field and listing %v", field, err, values)
		}
	}
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// TestLearnerAverage: learner.average defaults to the subspace solver's
// window (online.DefaultAverage), takes a negative value (the last
// iterate) and values in (0, 1], and refuses NaN and values above 1 with
// an error naming the key.
func TestLearnerAverage(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Learner.Average != online.DefaultAverage {
		t.Errorf("default learner.average %v, want %v", c.Learner.Average, online.DefaultAverage)
	}
	for _, v := range []string{"-1", "0.1", "1"} {
		if _, err := Load("", nil, "learner.average="+v); err != nil {
			t.Errorf("learner.average=%s refused: %v", v, err)
		}
	}
	for _, v := range []string{"1.5", "NaN"} {
		if _, err := Load("", nil, "learner.average="+v); err == nil || !strings.Contains(err.Error(), "learner.average") {
			t.Errorf("learner.average=%s: %v, want an error naming learner.average", v, err)
		}
	}
}

// TestOnlineKeyNamesEveryModelSetting: every field of online.Config that
// defines the model (those cluster members must share) is named by a
// key of this file, that key's setting reaches the field through Online
// (a changed value comes out changed, in the field's terms) and
// SetDefaults keeps it. The fields of online.Config are walked: one added
// there without a setting here fails.
func TestOnlineKeyNamesEveryModelSetting(t *testing.T) {
	base := Default()
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			switch {
			case online.Runtime(f):
				continue
			case f.Name == "Incarnation", f.Name == "DimY":
				continue // the incarnation a cluster leaves empty, y's width from the messages
			case prefix == "KernelY." && f.Name != "Family" && f.Name != "Bandwidth":
				continue // the second view's kernel takes a family and a bandwidth only
			case f.Type.Kind() == reflect.Struct:
				walk(prefix+f.Name+".", f.Type)
				continue
			}
			field := prefix + f.Name
			key := OnlineKey(field)
			if key == field {
				t.Errorf("online.Config's %s has no key", field)
				continue
			}
			if key == "model" || key == "kafka.dim" {
				continue // Online's arguments
			}
			c := base
			v := settingValue(t, &c, key)
			if !v.IsValid() {
				continue
			}
			before := fmt.Sprint(at(reflect.ValueOf(base.Learner.Online("m", 0)), strings.Split(field, ".")))
			if !settingtest.Change(v) {
				t.Errorf("%s: no other value to try", key)
				continue
			}
			after := fmt.Sprint(at(reflect.ValueOf(c.Learner.Online("m", 0)), strings.Split(field, ".")))
			if after == before || after != fmt.Sprint(v) {
				t.Errorf("%s = %v reaches online.Config's %s as %s (before: %s)", key, v, field, after, before)
			}
		}
	}
	walk("", reflect.TypeFor[online.Config]())
}

// settingValue returns the field of c whose YAML path is key.
func settingValue(t *testing.T, c *Config, key string) reflect.Value {
	t.Helper()
	v := reflect.ValueOf(c).Elem()
outer:
	for _, part := range strings.Split(key, ".") {
		for i := range v.NumField() {
			if strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0] == part {
				v = v.Field(i)
				continue outer
			}
		}
		t.Errorf("%s: not a setting of this file", key)
		return reflect.Value{}
	}
	return v
}

// TestRangesAreTheDeclaredOnes: a value just outside a setting's range
// (its min or max tag) is refused with the range in the error, and the
// value at the bound is taken.
func TestRangesAreTheDeclaredOnes(t *testing.T) {
	for _, c := range []struct{ out, want, at string }{
		{"learner.batch=1048577", "learner.batch: 1048577: must be ≤ 1048576", "learner.batch=1048576"},
		{"kafka.fetch_max_wait=9ms", "kafka.fetch_max_wait: 9ms: must be ≥ 10ms", "kafka.fetch_max_wait=10ms"},
		{"learner.keep_bytes=-2", "learner.keep_bytes: -2: must be ≥ -1", "learner.keep_bytes=-1"},
		{"kafka.dim=-1", "kafka.dim: -1: must be ≥ 0", "kafka.dim=1048576"},
		{"kafka.dim=1048577", "kafka.dim: 1048577: must be ≤ 1048576", "kafka.dim=1"},
		{"snapshot.every=-1s", "snapshot.every: -1s: must be ≥ 0s", "snapshot.every=1ms"},
		{"learner.max_features=16777217", "learner.max_features: 16777217: must be ≤ 16777216", "learner.max_features=16777216"},
		{"kafka.max_message_bytes=7", "kafka.max_message_bytes: 7: must be ≥ 8", "kafka.max_message_bytes=8"},
	} {
		if _, err := Load("", nil, c.out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.out, err, c.want)
		}
		if _, err := Load("", nil, c.at); err != nil {
			t.Errorf("%s refused: %v", c.at, err)
		}
	}
	if !slices.Contains(noZero, "learner.k") || !slices.Contains(noZero, "cluster.step_timeout") || slices.Contains(noZero, "learner.seed") {
		t.Errorf("settings refusing an explicit 0: %v", noZero)
	}
}

// Defect (issue 61): `brokers: 127.0.0.1:34527` (a YAML scalar, as one
// writes a single broker) failed with a truncated unmarshal error and no
// hint. A list setting now takes one comma-separated string too.
func TestAListSettingTakesAString(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("kafka:\n  brokers: 127.0.0.1:34527, b:9092\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Kafka.Brokers, []string{"127.0.0.1:34527", "b:9092"}) {
		t.Errorf("brokers %q; want the two of the string", c.Kafka.Brokers)
	}
}
