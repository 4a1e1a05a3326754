//go:build race

package serve

// raceDetector: built with -race, whose runtime drops sync.Pool items at
// random and instruments allocations, so heap bounds that count on
// reuse do not hold.
const raceDetector = true
