//go:build long

package online

// longTier: see tier_test.go.
const longTier = true
