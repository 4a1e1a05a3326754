package cluster_test

import (
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/cluster/gathertest"
)

func TestMemGroupConformance(t *testing.T) {
	gathertest.Run(t, func(t *testing.T, n int, timeout time.Duration) []cluster.Gatherer {
		g := cluster.NewMemGroup(n, timeout)
		out := make([]cluster.Gatherer, n)
		for i := range out {
			out[i] = g.Member(i)
		}
		return out
	})
}
