package output

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Producer stores records. Write returns nil once every message is
// stored, and an error when any may not be (the caller writes them all
// again: at least once). Messages of one source partition are stored in
// the order given, after those of earlier Writes. Write returns when ctx
// ends.
type Producer interface {
	Write(ctx context.Context, ms []Message) error
	Close() error
}

// Memory is an in-memory Producer for tests. Fail, when set, is returned
// by Write and nothing is stored; Delay slows each Write (within its
// context). Set them with SetFail and SetDelay while it is in use.
type Memory struct {
	mu     sync.Mutex
	ms     []Message
	writes int
	fail   error
	delay  time.Duration
	closed bool
}

// Write stores ms.
func (m *Memory) Write(ctx context.Context, ms []Message) error {
	m.mu.Lock()
	delay, fail := m.delay, m.fail
	m.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if fail != nil {
		return fail
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ms = append(m.ms, slices.Clone(ms)...)
	m.writes++
	return nil
}

// SetFail makes every Write fail with err (nil: succeed again).
func (m *Memory) SetFail(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
}

// SetDelay makes every Write take d.
func (m *Memory) SetDelay(d time.Duration) {
	m.mu.Lock()
	m.delay = d
	m.mu.Unlock()
}

// Messages returns the stored messages in store order.
func (m *Memory) Messages() []Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ms)
}

// Close marks the producer closed.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}
