package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/online"
)

// TestCompareBlockReachesLearner: `bench compare --block B` reaches the
// learner (its row names the block size it ran with), and the learner
// with its default block is named without one.
func TestCompareBlockReachesLearner(t *testing.T) {
	for _, tc := range []struct {
		block int
		want  string
	}{{64, "B = 64)"}, {0, "θ₁ = 0.05)"}} {
		res, err := RunCompare(context.Background(), CompareConfig{Case: "hermite1", Points: 2048, Budget: time.Second,
			Methods: []string{"dsgd=4096"}, Learner: online.Config{BlockSize: tc.block}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Methods[0].Method; !strings.HasSuffix(got, tc.want) {
			t.Errorf("block %d: method %q, want it to end in %q", tc.block, got, tc.want)
		}
		if e := res.Methods[0].ErrorAtEnd; !(e < 1) {
			t.Errorf("block %d: subspace error %v after 2,048 points", tc.block, e)
		}
	}
}
