// Package memwatch samples the heap for tests that assert a memory bound.
package memwatch

import (
	"runtime"
	"time"
)

// Start samples runtime.MemStats.HeapInuse every interval until the
// returned function is called; that function returns the peak seen.
func Start(interval time.Duration) (stop func() uint64) {
	done, finished := make(chan struct{}), make(chan uint64)
	go func() {
		var ms runtime.MemStats
		var peak uint64
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				finished <- peak
				return
			case <-time.After(interval): // sampling, not synchronisation
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-finished
	}
}
