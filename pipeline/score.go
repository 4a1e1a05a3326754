package pipeline

import (
	"sync"

	"github.com/streamkpca/streamkpca/snapshot"
)

// Score is a quality measure that the program embedding the pipeline
// knows for its stream, such as the demo's subspace error against the
// closed-form eigenfunctions of its synthetic data. The status page shows
// it for the served model; Eval runs at most once per served version, on
// the caller of Score (the status page or a progress display), never on
// the learning loop.
type Score struct {
	// Name says what the number is, for people: the status page prints
	// it as the row's heading.
	Name string
	// Eval scores a served model.
	Eval func(*snapshot.Model) (float64, error)
}

// ScoreValue is the Score of one served version.
type ScoreValue struct {
	Name    string
	Version uint64
	Value   float64
	Err     error
}

// scorer caches the score of the newest served version.
type scorer struct {
	mu   sync.Mutex
	s    *Score
	last *ScoreValue
}

// Score returns the configured score of the served model, evaluated once
// per version; ok is false without a Score (Options.Score) or before the
// first served model.
func (p *Pipeline) Score() (v ScoreValue, ok bool) {
	sc := &p.opts.scorer
	if sc.s == nil {
		return ScoreValue{}, false
	}
	m, _ := p.pub.cur.Get()
	if m == nil {
		return ScoreValue{}, false
	}
	ver := m.Header().Version()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.last == nil || sc.last.Version != ver {
		val, err := sc.s.Eval(m)
		sc.last = &ScoreValue{Name: sc.s.Name, Version: ver, Value: val, Err: err}
	}
	return *sc.last, true
}
