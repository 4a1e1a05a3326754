package bench

import (
	"github.com/streamkpca/streamkpca/cluster"
)

// ClusterResult is `streamkpca bench cluster`'s output: the measured rows
// and the modelled curve of larger groups drawn from them.
type ClusterResult struct {
	Rows  []ClusterRow      `json:"rows"`
	Model []ClusterModelRow `json:"model,omitempty"`
	// LinkBytesPerSec and RoundSec are the model's assumptions: the NATS
	// server's (and every instance's) bandwidth, and the latency of one
	// round.
	LinkBytesPerSec float64 `json:"link_bytes_per_second,omitempty"`
	RoundSec        float64 `json:"round_seconds,omitempty"`
}

// ClusterModelRow is the modelled rate of a group of Instances at D.
type ClusterModelRow struct {
	D         int    `json:"d"`
	Instances int    `json:"instances"`
	Exchange  string `json:"exchange"`
	// StepSec is the modelled step; PointsPerSec the group's rate and
	// Efficiency that rate over Instances × one instance's.
	StepSec      float64 `json:"step_seconds"`
	PointsPerSec float64 `json:"points_per_second"`
	Efficiency   float64 `json:"efficiency"`
}

// ModelCluster extends the measured rows to groups of 1 … upTo instances
// (powers of two), for both ways of summing the parts. A step costs one
// instance's measured step T_c (the Members 0 row at each d: every
// instance works on its own batch at once, each on its own machine), the
// rounds' latency, and the bytes the busiest link carries at link bytes a
// second: through one NATS server an all-gather of parts of P bytes sends
// n(n−1)·P a step and a reduce-scatter 2(n−1)·P (each member's slices to
// their reducers, then each reduced slice to the n−1 others); an
// instance's own link carries less than the server's. The model leaves
// out what the measured rows show on a shared machine (the members and
// the server sharing cores) and a NATS cluster spreading the server's
// load.
func ModelCluster(rows []ClusterRow, upTo int, link, round float64) []ClusterModelRow {
	var out []ClusterModelRow
	for _, base := range rows {
		if base.Members != 0 || base.StepSec <= 0 {
			continue
		}
		p := float64(8 * base.Features * base.K)
		for _, parts := range []cluster.PartsExchange{cluster.ReduceScatter, cluster.AllGatherParts} {
			for n := 1; n <= upTo; n *= 2 {
				t := base.StepSec
				if n > 1 {
					m := float64(n)
					server, rounds := 2*(m-1)*p, 3.0
					if parts == cluster.AllGatherParts {
						server, rounds = m*(m-1)*p, 2
					}
					t += rounds*round + server/link
				}
				rate := float64(n*base.Batch) / t
				out = append(out, ClusterModelRow{D: base.D, Instances: n, Exchange: partsName(parts), StepSec: t,
					PointsPerSec: rate, Efficiency: base.StepSec / t})
			}
		}
	}
	return out
}
