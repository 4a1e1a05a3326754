package gathertest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/cluster/gathertest"
	"github.com/streamkpca/streamkpca/internal/testkit"
)

// broken are Gatherers that each break one promise of cluster.Gatherer.
var broken = map[string]func(cluster.Gatherer) cluster.Gatherer{
	// the payloads of AllGather in reverse rank order
	"reversed": func(g cluster.Gatherer) cluster.Gatherer { return reversed{g} },
	// AllToAll's parts shifted by one member
	"crossed": func(g cluster.Gatherer) cluster.Gatherer { return crossed{g} },
	// a round without a member completes, with what came
	"patient": func(g cluster.Gatherer) cluster.Gatherer { return patient{g} },
	// a cancelled round says something else than its context's error
	"vague": func(g cluster.Gatherer) cluster.Gatherer { return vague{g} },
	// payloads cut at 1 MiB, as a transport with a message size limit
	// that does not split them would deliver them
	"truncating": func(g cluster.Gatherer) cluster.Gatherer { return truncating{g} },
	// every member says it is the next one's rank
	"misranked": func(g cluster.Gatherer) cluster.Gatherer { return misranked{g} },
}

type misranked struct{ cluster.Gatherer }

func (m misranked) Rank() int { return (m.Gatherer.Rank() + 1) % m.Size() }

type truncating struct{ cluster.Gatherer }

const limit = 1 << 20

func cut(all [][]byte) [][]byte {
	for i, p := range all {
		all[i] = p[:min(len(p), limit)]
	}
	return all
}

func (c truncating) AllGather(ctx context.Context, round uint64, p []byte) ([][]byte, error) {
	all, err := c.Gatherer.AllGather(ctx, round, p)
	return cut(all), err
}

func (c truncating) AllToAll(ctx context.Context, round uint64, parts [][]byte) ([][]byte, error) {
	got, err := c.Gatherer.AllToAll(ctx, round, parts)
	return cut(got), err
}

type reversed struct{ cluster.Gatherer }

func (r reversed) AllGather(ctx context.Context, round uint64, p []byte) ([][]byte, error) {
	all, err := r.Gatherer.AllGather(ctx, round, p)
	slices.Reverse(all)
	return all, err
}

type crossed struct{ cluster.Gatherer }

func (c crossed) AllToAll(ctx context.Context, round uint64, parts [][]byte) ([][]byte, error) {
	got, err := c.Gatherer.AllToAll(ctx, round, parts)
	if len(got) > 1 {
		got = append(got[1:], got[0])
	}
	return got, err
}

type patient struct{ cluster.Gatherer }

func (p patient) AllGather(ctx context.Context, round uint64, b []byte) ([][]byte, error) {
	all, err := p.Gatherer.AllGather(ctx, round, b)
	if err != nil && ctx.Err() == nil {
		return all, nil
	}
	return all, err
}

type vague struct{ cluster.Gatherer }

func (v vague) AllGather(ctx context.Context, round uint64, b []byte) ([][]byte, error) {
	all, err := v.Gatherer.AllGather(ctx, round, b)
	if errors.Is(err, context.Canceled) {
		err = errors.New("stopped")
	}
	return all, err
}

// TestTheSuiteCanFail: each broken Gatherer fails the subtest of the
// promise it breaks, and only that one.
func TestTheSuiteCanFail(t *testing.T) {
	for name, wrap := range broken {
		if testkit.InChild("GATHERTEST_BROKEN=" + name) {
			gathertest.Run(t, func(t *testing.T, n int, timeout time.Duration) []cluster.Gatherer {
				g := cluster.NewMemGroup(n, timeout)
				out := make([]cluster.Gatherer, n)
				for i := range out {
					out[i] = wrap(g.Member(i))
				}
				return out
			})
			return
		}
	}
	all := []string{"RankOrder", "AllToAll", "MemberGone", "Cancel"}
	for name, fails := range map[string][]string{
		"reversed": {"RankOrder"}, "crossed": {"AllToAll"}, "patient": {"MemberGone"}, "vague": {"Cancel"},
		// Both suites of payloads hold some of several megabytes.
		"truncating": {"RankOrder", "AllToAll"},
		"misranked":  {"RankOrder", "AllToAll"},
	} {
		testkit.ChildFails(t, "GATHERTEST_BROKEN="+name, all, fails)
	}
}
