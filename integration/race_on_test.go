//go:build race

package integration

// raceScale shortens the streams under the race detector, which slows the
// learner ~10×; the assertions are the same.
const raceScale = 4
