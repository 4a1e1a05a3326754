package integration

import "testing"

// longOnly skips t outside the long tier (see longTier), saying how to
// run it.
func longOnly(t *testing.T) {
	t.Helper()
	if !longTier {
		t.Skip("long tier: go test -tags long ./integration")
	}
}
