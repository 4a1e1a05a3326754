package pipeline

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRatesOverTheirWindows: the throughput now is over the last rateNow
// (10 s) of samples, the lag's trend over every sample kept; both are
// the closed-form slopes of the points given. Fewer than two points: not
// ok.
func TestRatesOverTheirWindows(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	var pts []ratePoint
	// 60 s: 1,000 samples/s for 45 s, then 4,000/s; the lag grows by 50/s.
	var samples uint64
	for s := 0; s <= 60; s++ {
		if s > 0 {
			if s <= 45 {
				samples += 1000
			} else {
				samples += 4000
			}
		}
		pts = append(pts, ratePoint{t: t0.Add(time.Duration(s) * time.Second), samples: samples, lag: int64(100 + 50*s)})
	}
	now, lag, span, ok := rates(pts)
	if !ok || now != 4000 || lag != 50 || span != time.Minute {
		t.Errorf("rates: now %g (want 4000 over the last 10 s), lag %g/s (50), span %s (1m), ok %v", now, lag, span, ok)
	}
	// Sparse points: the window reaches back to the newest point at least
	// rateNow old (here 30 s: 3,000 samples in 30 s).
	sparse := []ratePoint{{t0, 0, 10}, {t0.Add(30 * time.Second), 3000, 10}, {t0.Add(60 * time.Second), 6000, 10}}
	if now, lag, _, _ := rates(sparse); now != 100 || lag != 0 {
		t.Errorf("sparse points: now %g (want 100/s), lag %g/s (0)", now, lag)
	}
	if _, _, _, ok := rates(pts[:1]); ok {
		t.Error("one point gave a rate")
	}
}

// TestRecordRateKeepsOneASecondForTwoMinutes: samples closer than a
// second to the last are dropped, and those older than rateSpan (2 min)
// before the newest are forgotten.
func TestRecordRateKeepsOneASecondForTwoMinutes(t *testing.T) {
	var p Pipeline
	t0 := time.Unix(1e9, 0)
	for ms := 0; ms <= 300_000; ms += 250 { // 5 minutes, four calls a second
		p.recordRate(t0.Add(time.Duration(ms)*time.Millisecond), uint64(ms), 0)
	}
	if n := len(p.led.recent); n < 120 || n > 122 {
		t.Errorf("%d samples kept, want about 121 (one a second over 2 minutes)", n)
	}
	first, last := p.led.recent[0], p.led.recent[len(p.led.recent)-1]
	if span := last.t.Sub(first.t); span > rateSpan || span < rateSpan-time.Second {
		t.Errorf("samples span %s, want 2 minutes", span)
	}
	for i := 1; i < len(p.led.recent); i++ {
		if d := p.led.recent[i].t.Sub(p.led.recent[i-1].t); d < time.Second {
			t.Fatalf("samples %d and %d are %s apart, less than a second", i-1, i, d)
		}
	}
}

// TestLagTrendInWords: growing and shrinking beyond one message a second,
// steady within it.
func TestLagTrendInWords(t *testing.T) {
	for _, c := range []struct {
		perSec float64
		want   string
	}{
		{2000, "growing by 2000 messages/s over the last 90 s"},
		{-37.4, "shrinking by 37 messages/s over the last 90 s"},
		{0.9, "steady over the last 90 s"},
		{-1, "steady over the last 90 s"},
	} {
		if got := lagTrend(c.perSec, 90*time.Second); got != c.want {
			t.Errorf("lagTrend(%g) = %q, want %q", c.perSec, got, c.want)
		}
	}
}

// TestEigenChartGeometry: one polyline per component; the largest value
// is drawn at the plot's top (y = 30), the smallest at its bottom
// (y = 230), the first snapshot at the left axis (x = 60) and the last
// at the right end (x = 610); non-positive estimates are left out; fewer
// than two snapshots draw no chart.
func TestEigenChartGeometry(t *testing.T) {
	if s := eigenChart([]historyPoint{{Samples: 1, Eigenvalues: []float64{1}}}); strings.Contains(s, "<svg") {
		t.Error("a chart of one snapshot")
	}
	h := []historyPoint{
		{Samples: 1000, Eigenvalues: []float64{1, 0.01}},
		{Samples: 2000, Eigenvalues: []float64{0.5, 0}},
		{Samples: 3000, Eigenvalues: []float64{0.1, 0.02}},
	}
	svg := eigenChart(h)
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Fatalf("%d polylines, want one per component (2)", n)
	}
	lines := strings.Split(svg, "<polyline")[1:]
	points := func(l string) []string {
		_, rest, _ := strings.Cut(l, `points="`)
		p, _, _ := strings.Cut(rest, `"`)
		return strings.Fields(p)
	}
	top, bottom := points(lines[0]), points(lines[1])
	if len(top) != 3 || len(bottom) != 2 {
		t.Fatalf("points %v and %v: want 3, and 2 (the zero left out)", top, bottom)
	}
	// Component 1: 1 at (60, 30); component 2: 0.01 at (60, 230) and 0.02
	// at (610, 230 − 200·log(2)/log(100)).
	want2 := 230 - 200*math.Log(2)/math.Log(100)
	if top[0] != "60.0,30.0" || bottom[0] != "60.0,230.0" || !strings.HasPrefix(bottom[1], "610.0,") {
		t.Errorf("ends %s, %s, %s: want 60.0,30.0, 60.0,230.0 and x 610.0", top[0], bottom[0], bottom[1])
	}
	if want := fmt.Sprintf("610.0,%.1f", want2); bottom[1] != want {
		t.Errorf("0.02 drawn at %s, want %s", bottom[1], want)
	}
}
