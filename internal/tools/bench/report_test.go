package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestSlopeOfAPowerLaw: the fitted log-log slope of errors C·n^-a is -a
// (to rounding), using only the points inside [lo, hi] with a positive
// error; fewer than two such points have no slope.
func TestSlopeOfAPowerLaw(t *testing.T) {
	var c []CurvePoint
	for n := 1000; n <= 64000; n *= 2 {
		c = append(c, CurvePoint{Points: n, Error: 3 * math.Pow(float64(n), -0.5)})
	}
	c = append(c, CurvePoint{Points: 5000, Error: 0}, CurvePoint{Points: 7000, Error: math.NaN()}, CurvePoint{Points: 500, Error: 100}, CurvePoint{Points: 100000, Error: 1e-9})
	if got := Slope(c, 1000, 64000); math.Abs(got+0.5) > 1e-12 {
		t.Errorf("slope %v, want -0.5", got)
	}
	if got := Slope(c, 1000, 1999); !math.IsNaN(got) {
		t.Errorf("one point in range: slope %v, want NaN", got)
	}
}

// TestEncodeRowDecodes: a benchmark row reaches the service as the
// formats' own decoders read it back: f64le bit for bit, JSON to the
// same float64s (shortest round-trip form).
func TestEncodeRowDecodes(t *testing.T) {
	row := []float64{0, -0.5, 1e-300, math.Pi, -1.7976931348623157e308, 123456789.125}
	b := encodeRow("f64le", row)
	if len(b) != 8*len(row) {
		t.Fatalf("f64le: %d bytes for %d values", len(b), len(row))
	}
	for i, v := range row {
		if got := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])); got != v {
			t.Errorf("f64le value %d: %v, want %v", i, got, v)
		}
	}
	var back []float64
	if err := json.Unmarshal(encodeRow("json", row), &back); err != nil {
		t.Fatalf("json: %v in %s", err, encodeRow("json", row))
	}
	for i, v := range row {
		if back[i] != v {
			t.Errorf("json value %d: %v, want %v", i, back[i], v)
		}
	}
	if got := perPoint(2, 4); got != 5e5 {
		t.Errorf("2 s for 4 points: %v µs a point, want 500000", got)
	}
	if perPoint(0, 4) != 0 || perPoint(1, 0) != 0 {
		t.Error("per point of no time or no points: want 0")
	}
}

// TestCompareMethodJSON: a method with no model within the budget says
// so as null (JSON has no NaN) and reads back as NaN; a figure reads back
// as itself. The table prints "—" and "not reached" for them.
func TestCompareMethodJSON(t *testing.T) {
	none := CompareMethod{Method: "exact", ErrorAtBudget: math.NaN(), To1e2: -1, To1e3: 0.5, ErrorAtEnd: 1e-3}
	b, err := json.Marshal(none)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"error_at_budget":null`) {
		t.Fatalf("no model within the budget: %s, want error_at_budget null", b)
	}
	var back CompareMethod
	if err := json.Unmarshal(b, &back); err != nil || !math.IsNaN(back.ErrorAtBudget) || back.To1e2 != -1 || back.Method != "exact" {
		t.Fatalf("read back %+v (%v)", back, err)
	}
	some := none
	some.ErrorAtBudget = 0.25
	b, _ = json.Marshal(some)
	if err := json.Unmarshal(b, &back); err != nil || back.ErrorAtBudget != 0.25 {
		t.Fatalf("read back error at budget %v (%v) from %s", back.ErrorAtBudget, err, b)
	}
	var out bytes.Buffer
	PrintCompareTable(&out, CompareResult{About: "hermite", Points: 100, BudgetSeconds: 10, Methods: []CompareMethod{none, some}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[2], "not reached") || !strings.Contains(lines[2], "—") || !strings.Contains(lines[3], "0.25") {
		t.Fatalf("table:\n%s\nwant a title, a header and two rows (the first with \"not reached\" and \"—\")", out.String())
	}
}

// TestMNISTRunDefaults: only the zero fields take the task's defaults.
func TestMNISTRunDefaults(t *testing.T) {
	r := MNISTRun{Train: 7, Budget: time.Second}
	r.setDefaults(MNISTCCADefaults)
	def := MNISTCCADefaults
	if r.Train != 7 || r.Budget != time.Second || r.Test != def.Test || r.K != def.K || r.Epochs != def.Epochs || r.Batch != 512 || r.Seed != 1 {
		t.Fatalf("%+v: want train 7, budget 1s, the rest from %+v, batch 512, seed 1", r, def)
	}
}
