package configs

import (
	"errors"
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/features"
)

// TestEveryRuleNamesItsSettingAlone: each rule of Validate, broken by one
// --set against the defaults, yields exactly one problem and it names the
// setting to change (the table is the rules as the docs state them, not
// read from the code): a rule that fires for a neighbour, or two rules
// that fire for one mistake, fail here.
func TestEveryRuleNamesItsSettingAlone(t *testing.T) {
	for _, tc := range []struct {
		set   []string
		field string
	}{
		{[]string{"model=a/b"}, "model"},
		{[]string{"model=a b"}, "model"},
		{[]string{"nats.prefix=x.y"}, "nats.prefix"},
		{[]string{"kafka.start=middle"}, "kafka.start"},
		{[]string{"kafka.max_abs=NaN"}, "kafka.max_abs"},
		{[]string{"kafka.sasl.mechanism=gssapi"}, "kafka.sasl.mechanism"},
		{[]string{"learner.kernel=spline"}, "learner.kernel"},
		{[]string{"learner.bandwidth=-1"}, "learner.bandwidth"}, // once, not also as learner.kernel
		{[]string{"learner.block=2", "learner.k=5"}, "learner.block"},
		{[]string{"learner.frequencies=sobol"}, "learner.frequencies"},
		{[]string{"learner.solver=lanczos"}, "learner.solver"},
		{[]string{"learner.algorithm=ksvd", "kafka.format=json", "learner.solver=covariance"}, "learner.solver"},
		{[]string{"learner.solver=covariance", "learner.max_features=1000000"}, "learner.max_features"},
		{[]string{"learner.forget=always"}, "learner.forget"},
		{[]string{"learner.load_shedding=maybe"}, "learner.load_shedding"},
		{[]string{"learner.budget=infinite"}, "learner.budget"},
		{[]string{"learner.target_load=1.5"}, "learner.target_load"},
		{[]string{"learner.replay=-2"}, "learner.replay"},
		{[]string{"learner.replay=NaN"}, "learner.replay"},
		{[]string{"learner.replay=+Inf"}, "learner.replay"},
		{[]string{"learner.holdout=-1"}, "learner.holdout"},
		{[]string{"learner.average=2"}, "learner.average"},
		{[]string{"learner.average=NaN"}, "learner.average"},
		{[]string{"learner.ridge=-0.1"}, "learner.ridge"},
		{[]string{"learner.ridge=+Inf"}, "learner.ridge"},
		{[]string{"learner.max_features=256", "learner.block=512"}, "learner.max_features"},
		{[]string{"learner.theta0=-1"}, "learner.theta0/theta1"},
		{[]string{"learner.theta1=-1"}, "learner.theta0/theta1"},
		{[]string{"learner.kernel=linear", "kafka.dim=3", "learner.k=4", "learner.block=4"}, "learner.k"},
		{[]string{"nats.lease_ttl=500ms"}, "nats.lease_ttl"},
		{[]string{"http.tls_cert_file=/c.pem"}, "http.tls_cert_file/tls_key_file"},
		{[]string{"http.tls_key_file=/k.pem"}, "http.tls_cert_file/tls_key_file"},
		{[]string{"cluster.enabled=true", "nats.disabled=true"}, "cluster.enabled"},
		{[]string{"cluster.enabled=true", "learner.algorithm=kcca", "kafka.format=json"}, "cluster.enabled"},
		{[]string{"cluster.enabled=true", "learner.solver=covariance"}, "cluster.enabled"},
		{[]string{"cluster.enabled=true", "learner.features=landmarks"}, "cluster.enabled: learner.features landmarks"}, // what was set, not the solver it implies
		{[]string{"cluster.enabled=true", "cluster.step_timeout=10ms", "learner.linger=20ms"}, "cluster.step_timeout"},
		{[]string{"log.level=trace"}, "log.level"},
		{[]string{"log.format=xml"}, "log.format"},
		{[]string{"kafka.format=avro"}, "kafka.schema_registry.url"},
		{[]string{"kafka.format=protobuf", "kafka.schema_registry.url= "}, "kafka.schema_registry.url"},
		{[]string{"kafka.format=csv", "learner.algorithm=kcca"}, "kafka.format"},
	} {
		_, err := Load("", nil, tc.set...)
		if err == nil {
			t.Errorf("%v accepted; want one problem naming %s", tc.set, tc.field)
			continue
		}
		var joined interface{ Unwrap() []error }
		n := 1
		if errors.As(err, &joined) {
			n = len(joined.Unwrap())
		}
		if n != 1 || !strings.Contains(err.Error(), "\n"+tc.field+": ") {
			t.Errorf("%v: %d problem(s) %q; want one, naming %s", tc.set, n, err, tc.field)
		}
	}
}

// TestBoundaryValuesAreAccepted: the edges the docs call valid are
// accepted (a rule written with < for ≤ fails here).
func TestBoundaryValuesAreAccepted(t *testing.T) {
	for _, set := range [][]string{
		{"learner.target_load=1"},
		{"learner.replay=-1"}, {"learner.replay=0.5"}, // off; half a revisit a row
		{"learner.holdout=1"},
		{"learner.average=-1"}, // serve the last iterate
		{"learner.ridge=0"},    // kcca chooses it on held-out pairs
		{"learner.bandwidth=0"},
		{"learner.theta0=0", "learner.theta1=0"},
		{"learner.block=5", "learner.k=5", "learner.max_features=5"},
		{"learner.kernel=linear", "kafka.dim=4", "learner.k=4", "learner.block=4"},
		{"nats.replicas=1"}, {"nats.replicas=5"},
		{"nats.lease_ttl=1s"},
		{"kafka.sasl.mechanism=scram-sha-512"},
		{"log.format=json"}, {"log.level=error"},
		{"http.addr=off"},
		{"http.addr=[::1]:8080"}, {"http.addr=localhost:8080"},
		{"http.addr=:8080", "http.allow_unauthenticated=true"},
		{"http.tls_cert_file=/c.pem", "http.tls_key_file=/k.pem"},
		{"cluster.enabled=true"},
		{"model=Model_1-b"},
	} {
		if _, err := Load("", nil, set...); err != nil {
			t.Errorf("%v refused: %v", set, err)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:80": true, "127.8.9.1:80": true, "[::1]:80": true, "localhost:80": true,
		":80": false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1:80": false,
		"example.com:80": false, "127.0.0.1": false, "": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestSetParsesEveryKind: --set values reach fields of every kind a
// setting has (duration, bool, integers, floats, lists), and a value
// that is not of the field's kind is refused naming the setting.
func TestSetParsesEveryKind(t *testing.T) {
	c, err := Load("", nil,
		"snapshot.every=90s", "learner.center=true", "learner.seed=18446744073709551615",
		"learner.k=3", "learner.ridge=0.25", "kafka.brokers= a:1 ,b:2",
		"learner.kernel=dotproduct", "learner.coefficients=1, 0.5,0.25")
	if err != nil {
		t.Fatal(err)
	}
	if c.Snapshot.Every != 90*time.Second || !c.Learner.Center || c.Learner.Seed != 1<<64-1 || c.Learner.K != 3 ||
		c.Learner.Ridge != 0.25 || !slices.Equal(c.Kafka.Brokers, []string{"a:1", "b:2"}) ||
		!reflect.DeepEqual(c.Learner.Coefficients, []float64{1, 0.5, 0.25}) {
		t.Errorf("parsed %+v", c)
	}
	for _, set := range []string{
		"snapshot.every=90", "learner.center=yes please", "learner.seed=-1", "learner.k=3.5",
		"learner.ridge=small", "learner.coefficients=1,x",
	} {
		key, _, _ := strings.Cut(set, "=")
		if _, err := Load("", nil, set); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("--set %s: %v, want an error naming %s", set, err, key)
		}
	}
}

// TestFlagValuesCheckedInTheFlagsTerms: a learner flag refuses a value of
// the wrong kind at parse time, with the flag's name, before any setting
// rule runs; zero is refused as "leave the flag out", negative only where
// a negative value means something (the byte bounds).
func TestFlagValuesCheckedInTheFlagsTerms(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--k", "three"}, false},
		{[]string{"--k", "0"}, false},
		{[]string{"--k", "-2"}, false},
		{[]string{"--keep-bytes", "-1"}, true},
		{[]string{"--cache-bytes", "-1"}, true},
		{[]string{"--seed", "-1"}, false},
		{[]string{"--seed", "0"}, true},
		{[]string{"--ridge", "tiny"}, false},
		{[]string{"--ridge", "1e-3"}, true},
		{[]string{"--bandwidth-y", "auto"}, true},
		{[]string{"--kernel", "anything"}, true}, // strings are checked by Validate
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		sets := LearnerFlags(fs)
		err := fs.Parse(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok=%v", tc.args, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), strings.TrimPrefix(tc.args[0], "--")) {
			t.Errorf("%v: %v does not name the flag", tc.args, err)
		}
		if err == nil && tc.args[1] == "auto" && len(sets()) != 0 {
			t.Errorf("%v: auto became an override %q; it is the default", tc.args, sets())
		}
	}
}

// TestTheSecondViewsKernel: learner.kernel_y and bandwidth_y give the
// second view's kernel; unset, it is the first view's family with the
// median trick (online's rule, stated in the docs).
func TestTheSecondViewsKernel(t *testing.T) {
	c, err := Load("", nil, "learner.algorithm=kcca", "kafka.format=json", "learner.kernel_y=laplacian", "learner.bandwidth_y=2.5")
	if err != nil {
		t.Fatal(err)
	}
	if k := c.Learner.KernelYSpec(); k.Family != features.Laplacian || k.Bandwidth != 2.5 {
		t.Errorf("KernelYSpec %+v, want laplacian with bandwidth 2.5", k)
	}
	if k := c.Learner.KernelSpec(); k.Family != features.Gaussian {
		t.Errorf("KernelSpec %+v, want the default gaussian", k)
	}
	for field, key := range map[string]string{
		"KernelY.Bandwidth": "learner.bandwidth_y", "KernelY.Family": "learner.kernel_y",
		"KernelY.Degree": "learner.kernel_y", "DimY": "the dimension of the messages' y",
		"NoSuchField": "NoSuchField",
	} {
		if got := OnlineKey(field); got != key {
			t.Errorf("OnlineKey(%s) = %q, want %q", field, got, key)
		}
	}
}

// Defect: learner.holdout: 0 silently became the default (one in 16),
// where the docs say 1 holds out nothing: a user writing 0 to mean
// "none" got a held-out score anyway. An explicit 0 is refused.
func TestHoldoutZeroRefused(t *testing.T) {
	if _, err := Load("", nil, "learner.holdout=0"); err == nil || !strings.Contains(err.Error(), "learner.holdout") {
		t.Errorf("--set learner.holdout=0: %v, want an error naming learner.holdout", err)
	}
	if c, err := Load("", nil, "learner.holdout=1"); err != nil || c.Learner.Holdout != 1 {
		t.Errorf("learner.holdout=1: %v, %d", err, c.Learner.Holdout)
	}
}
