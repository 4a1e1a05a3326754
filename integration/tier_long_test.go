//go:build long

package integration

// longTier: see tier_test.go.
const longTier = true
