// Package splitmix is the hash the service draws its deterministic
// subsets with: the held-out slice (online.HeldOut), load shedding's
// (pipeline), fit's held-out rows and the ridge choice's folds.
package splitmix

// Mix is SplitMix64's finaliser (Steele, Lea & Flood 2014, "Fast
// splittable pseudorandom number generators"): every input bit moves
// every output bit.
func Mix(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}
