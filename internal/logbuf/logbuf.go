// Package logbuf is a log sink for tests: a buffer that loggers on several
// goroutines (client libraries' callbacks) can write to while the test
// reads it.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent Write and String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
