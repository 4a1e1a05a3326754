package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/memwatch"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// PublishConfig configures RunPublish. Zero values mean the default.
type PublishConfig struct {
	// Size of the published object, bytes. Default: 500 MB.
	Size int
	// NATS is the server's URL; "" starts an embedded one in dir, whose
	// own memory (JetStream's buffers) is then part of the heap measured.
	NATS string
	Dir  string
}

// PublishResult is the memory and time of one publish and one fetch of
// a Size-byte object.
type PublishResult struct {
	Size     int  `json:"size_bytes"`
	Embedded bool `json:"embedded_server"`
	// PublishSeconds and PublishPeak: Publisher.Publish's time and the
	// peak heap in use during it (the object itself included: the ratio
	// to the size is what the publish path holds, 1 = the object once).
	PublishSeconds   float64 `json:"publish_seconds"`
	PublishPeak      uint64  `json:"publish_peak_heap_bytes"`
	PublishPeakRatio float64 `json:"publish_peak_ratio"`
	// GetSeconds and GetPeak: reading the version back to its end
	// through NATSBackend.GetObject (its digest checked), from a heap
	// without the object: what the transfer itself holds. A reader that
	// decodes a snapshot holds, beyond it, the model it builds.
	GetSeconds   float64 `json:"get_seconds"`
	GetPeak      uint64  `json:"get_peak_heap_bytes"`
	GetPeakRatio float64 `json:"get_peak_ratio"`
}

// RunPublish publishes a Size-byte version through a Publisher over NATS
// and fetches it back as a reader does, sampling the heap every 2 ms.
// The object is opaque bytes: the publish path does not decode it.
func RunPublish(ctx context.Context, cfg PublishConfig) (PublishResult, error) {
	if cfg.Size == 0 {
		cfg.Size = 500 << 20
	}
	res := PublishResult{Size: cfg.Size, Embedded: cfg.NATS == ""}
	url := cfg.NATS
	if url == "" {
		stack, err := devstack.StartNATSOnly(cfg.Dir, nil)
		if err != nil {
			return res, err
		}
		defer stack.Close()
		url = stack.NATSURL()
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return res, fmt.Errorf("bench publish: %w", err)
	}
	defer nc.Close()
	pc := publish.Config{Model: "bench-publish", Keep: 1}
	pub, err := publish.NewPublisher(nc, pc, zerolog.Nop())
	if err != nil {
		return res, err
	}
	data := make([]byte, cfg.Size)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	snap := &snapshot.Snapshot{Header: snapshot.Header{Model: pc.Model, Incarnation: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Step: 1, Created: time.Now().UTC()}}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	heap()
	stop := memwatch.Start(2 * time.Millisecond)
	t0 := time.Now()
	n, err := pub.Publish(ctx, snap, data)
	res.PublishSeconds, res.PublishPeak = time.Since(t0).Seconds(), stop()
	if err != nil {
		return res, err
	}
	res.PublishPeakRatio = float64(res.PublishPeak) / float64(cfg.Size)
	data = nil
	b, err := publish.NewNATSBackend(nc, pc, false)
	if err != nil {
		return res, err
	}
	heap()
	stop = memwatch.Start(2 * time.Millisecond)
	t0 = time.Now()
	got, err := readToEnd(ctx, b, n.Object)
	res.GetSeconds, res.GetPeak = time.Since(t0).Seconds(), stop()
	if err != nil {
		return res, err
	}
	if got != int64(cfg.Size) {
		return res, fmt.Errorf("bench publish: fetched %d bytes of %d", got, cfg.Size)
	}
	res.GetPeakRatio = float64(res.GetPeak) / float64(cfg.Size)
	return res, nil
}

// readToEnd reads the object name through b to its end and returns its
// size.
func readToEnd(ctx context.Context, b publish.Backend, name string) (int64, error) {
	rc, err := b.GetObject(ctx, name)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}
