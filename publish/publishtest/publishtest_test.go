package publishtest_test

import (
	"context"
	"testing"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/publish/publishtest"
)

// noCAS swaps a key whatever its revision: no compare in the
// compare-and-swap.
type noCAS struct{ *publish.MemBackend }

func (b noCAS) SwapKey(ctx context.Context, key string, value []byte, _ uint64) (uint64, error) {
	if err := b.PutKey(ctx, key, value); err != nil {
		return 0, err
	}
	_, rev, err := b.GetKeyRevision(ctx, key)
	return rev, err
}

// hoarding says it deleted an object and keeps it.
type hoarding struct{ *publish.MemBackend }

func (hoarding) DeleteObject(context.Context, string) error { return nil }

// TestTheSuiteCanFail: a backend that breaks one promise of
// publish.Backend fails the subtests of the rules built on it, and
// passes the others.
func TestTheSuiteCanFail(t *testing.T) {
	broken := map[string]func(*publish.MemBackend) publish.Backend{
		"no-cas":   func(b *publish.MemBackend) publish.Backend { return noCAS{b} },
		"hoarding": func(b *publish.MemBackend) publish.Backend { return hoarding{b} },
	}
	for name, wrap := range broken {
		if testkit.InChild("PUBLISHTEST_BROKEN=" + name) {
			publishtest.Run(t, publishtest.Harness{Golden: "../../snapshot/testdata/golden.skpca", New: func(t *testing.T) func(bool) publish.Backend {
				b := wrap(publish.NewMemBackend())
				return func(bool) publish.Backend { return b }
			}})
			return
		}
	}
	all := []string{"Reset", "PoisonedPointer", "Pins", "LateReader", "SwapKey", "Lease"}
	for name, fails := range map[string][]string{
		// The lease's sequential rule (a second owner refused while the
		// first renews) holds without the compare; the compare decides a
		// race of two owners, which publish's TestLeaseRaceOneWinner runs.
		"no-cas": {"SwapKey"},
		// Pruning: the store keeps what it should have dropped.
		"hoarding": {"Reset", "Pins"},
	} {
		testkit.ChildFails(t, "PUBLISHTEST_BROKEN="+name, all, fails)
	}
}
