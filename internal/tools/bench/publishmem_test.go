package bench

import (
	"testing"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// The publish path holds a version once, and a fetch never holds it
// whole: a get is a reader of the object's chunks (publish.Backend).
// The server runs in a child process, so that its buffers are not
// counted (`streamkpca bench publish` against an external server:
// 1.03× and 0.07–0.10× at 500 MB). The fetch held room for the whole
// object before the Backend streamed (1.09–1.11×).
func TestPublishHoldsTheVersionOnce(t *testing.T) {
	if testkit.ServeNATSProcess(t) {
		return
	}
	const size = 128 << 20
	res, err := RunPublish(t.Context(), PublishConfig{Size: size, NATS: testkit.NATSProcess(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("publish %.2f s at %.2f× the size, fetch %.2f s at %.2f×", res.PublishSeconds, res.PublishPeakRatio, res.GetSeconds, res.GetPeakRatio)
	if res.Size != size || res.Embedded {
		t.Fatalf("result for %d bytes (embedded %v), want %d with the server in another process", res.Size, res.Embedded, size)
	}
	if res.PublishPeakRatio < 1 {
		t.Errorf("the publish's peak heap is %.2f× the version, below the version itself: the heap is not measured", res.PublishPeakRatio)
	}
	if res.GetPeakRatio >= 0.9 {
		t.Errorf("the fetch's peak heap is %.2f× the version: a get holds it whole", res.GetPeakRatio)
	}
}
