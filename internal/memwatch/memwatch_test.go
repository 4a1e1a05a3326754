package memwatch

import (
	"runtime"
	"testing"
	"time"
)

// TestPeakSeesALiveAllocation: 64 MiB held while the watch samples is in
// its peak; the peak never exceeds what the runtime reports it has
// obtained from the system.
func TestPeakSeesALiveAllocation(t *testing.T) {
	const size = 64 << 20
	stop := Start(time.Millisecond)
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	time.Sleep(20 * time.Millisecond)
	peak := stop()
	runtime.KeepAlive(buf)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if peak < size || peak > ms.HeapSys {
		t.Fatalf("peak %d bytes with %d held; want at least that and at most HeapSys %d", peak, size, ms.HeapSys)
	}
}
