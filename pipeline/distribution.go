package pipeline

import (
	"github.com/streamkpca/streamkpca/publish"
)

// distributionHooks are what the service does when its distributor
// (publish.Distributor) publishes, fails, wins or loses the model
// name's lease, or reads how full the store is: its metrics, its
// status, and the NATS query service, which answers for the model only
// while this service owns the name. The first time the lease is won,
// the operator's pin is restored.
func (p *Pipeline) distributionHooks() publish.Hooks {
	return publish.Hooks{
		Published: func(n publish.Notice) {
			p.met.Publishes.Inc()
			p.mu.Lock()
			p.led.status.Published = n.Version
			p.met.Published.Set(float64(n.Version))
			p.mu.Unlock()
		},
		Failed: func(error) { p.met.PublishErrors.Inc() },
		Ownership: func(held, first bool) {
			if !first {
				p.met.LeaseChanges.Inc()
			}
			if !held {
				p.met.LeaseHeld.Set(0)
				p.serveNATS(false)
				return
			}
			p.met.LeaseHeld.Set(1)
			if first {
				p.restorePin()
			}
			p.serveNATS(true)
		},
		Usage: func(u publish.StoreUsage) {
			p.mu.Lock()
			p.led.status.Store = &u
			p.mu.Unlock()
		},
	}
}

// serveNATS registers the NATS query service (on) or stops it.
func (p *Pipeline) serveNATS(on bool) {
	if err := p.pub.front.Set(on); err != nil {
		p.log.Warn().Err(err).Msg("NATS query service not registered (NATS unreachable?); HTTP queries still work")
	}
}
