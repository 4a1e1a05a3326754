//go:build !race

package integration

const raceScale = 1
