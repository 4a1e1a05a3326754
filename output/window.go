package output

// Window keeps the last residuals of the stream's held-out rows, oldest
// first: each version's novelty reference (snapshot.Novelty) is the
// window when the version is cut. The zero value is unusable; use
// NewWindow.
type Window struct {
	ring  []float64
	start int
	n     int
}

// NewWindow returns an empty window of capacity n ≥ 1, holding the last
// of restored (oldest first) that fit.
func NewWindow(n int, restored []float64) *Window {
	w := &Window{ring: make([]float64, n)}
	if len(restored) > n {
		restored = restored[len(restored)-n:]
	}
	for _, r := range restored {
		w.Push(r)
	}
	return w
}

// Push adds r, dropping the oldest when the window is full.
func (w *Window) Push(r float64) {
	if w.n < len(w.ring) {
		w.ring[(w.start+w.n)%len(w.ring)] = r
		w.n++
		return
	}
	w.ring[w.start] = r
	w.start = (w.start + 1) % len(w.ring)
}

// Len is the number of residuals held.
func (w *Window) Len() int { return w.n }

// Values returns a copy of the residuals, oldest first (nil when empty).
func (w *Window) Values() []float64 {
	if w.n == 0 {
		return nil
	}
	out := make([]float64, w.n)
	for i := range out {
		out[i] = w.ring[(w.start+i)%len(w.ring)]
	}
	return out
}
