package progress

import (
	"bytes"
	"testing"
	"time"
)

// TestETA: the remaining time at the rate so far, in whole seconds; none
// before any progress or once done.
func TestETA(t *testing.T) {
	for _, c := range []struct {
		done, total float64
		elapsed     time.Duration
		want        string
	}{
		{25, 100, 10 * time.Second, "  ETA 30s"},
		{1, 3, 90 * time.Second, "  ETA 3m0s"},
		{0, 100, time.Second, ""},
		{100, 100, time.Second, ""},
		{120, 100, time.Second, ""},
	} {
		if got := ETA(c.done, c.total, c.elapsed); got != c.want {
			t.Errorf("ETA(%v, %v, %v) = %q, want %q", c.done, c.total, c.elapsed, got, c.want)
		}
	}
}

// TestLine: a line that is off (not a terminal) writes nothing; one that
// is on redraws at most five times a second and Done clears it.
func TestLine(t *testing.T) {
	var off bytes.Buffer
	l := &Line{w: &off}
	l.Update("x %d", 1)
	l.Done()
	if off.Len() != 0 {
		t.Errorf("an off line wrote %q", off.String())
	}
	var on bytes.Buffer
	l = &Line{w: &on, on: true}
	l.Update("step %d", 1)
	l.Update("step %d", 2) // within 200 ms: dropped
	if got := on.String(); got != "\r\033[Kstep 1" {
		t.Errorf("two updates at once wrote %q", got)
	}
	l.last = time.Now().Add(-time.Second)
	l.Update("step %d", 3)
	l.Done()
	if got := on.String(); got != "\r\033[Kstep 1\r\033[Kstep 3\r\033[K" {
		t.Errorf("wrote %q", got)
	}
}
