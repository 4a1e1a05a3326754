//go:build !long

package online

// longTier is false in the quick tier, `go test ./...` (at most about 5
// minutes on 2 cores), and true in the long tier, `go test -tags long
// ./...`, which CI runs as well: the long statistical and fault tests
// call longOnly, which skips them here with a message naming the tier.
const longTier = false
