package serve

import (
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/publish"
)

// Switch is the NATS query service of a service that may stand by: it
// is registered while the service owns the model's name and stopped
// while another does (publish.Distributor's lease), so that no reader
// gets two models' answers. Safe for concurrent use; a nil *Switch does
// nothing (no NATS connection: HTTP queries only).
type Switch struct {
	start func() (*Service, error)
	mu    sync.Mutex
	svc   *Service
}

// NewSwitch returns the switch of NewService(nc, cfg, cur, lim, opt),
// off.
func NewSwitch(nc *nats.Conn, cfg publish.Config, cur *Current, lim Limits, opt VersionOptions) *Switch {
	return &Switch{start: func() (*Service, error) { return NewService(nc, cfg, cur, lim, opt) }}
}

// Set registers the service (on) or stops it. A registration that fails
// (NATS unreachable) returns its error and leaves the switch off: the
// next Set(true) tries again.
func (s *Switch) Set(on bool) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !on && s.svc != nil:
		s.svc.Stop()
		s.svc = nil
	case on && s.svc == nil:
		svc, err := s.start()
		if err != nil {
			return err
		}
		s.svc = svc
	}
	return nil
}
