package logbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: lines written by 8 goroutines at once all arrive
// whole (run under -race in CI, which fails an unguarded buffer).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	const writers, lines = 8, 200
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(&b, "w%d line %d\n", w, i)
				_ = b.String() // a reader while others write
			}
		}()
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	seen := map[string]bool{}
	for _, l := range got {
		seen[l] = true
	}
	for w := range writers {
		for i := range lines {
			if l := fmt.Sprintf("w%d line %d", w, i); !seen[l] {
				t.Fatalf("line %q lost or torn", l)
			}
		}
	}
}
