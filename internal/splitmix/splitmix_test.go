package splitmix

import "testing"

// TestMixIsSplitMix64: the first outputs of SplitMix64 seeded with 0 —
// state s advanced by the golden gamma before each finalisation — are
// the published reference values (Vigna's splitmix64.c).
func TestMixIsSplitMix64(t *testing.T) {
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	var s uint64
	for i, w := range want {
		if got := Mix(s); got != w {
			t.Errorf("output %d: %#x, want %#x", i, got, w)
		}
		s += 0x9E3779B97F4A7C15
	}
}
