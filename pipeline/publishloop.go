package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/serve"
	"github.com/streamkpca/streamkpca/snapshot"
)

type pubItem struct {
	snap *snapshot.Snapshot
	data []byte
}

// publishLoop publishes the newest persisted version, retrying with backoff
// while NATS is unreachable; a newer version supersedes a pending one.
func (p *Pipeline) publishLoop(ctx context.Context) {
	var pending *pubItem
	backoff := 500 * time.Millisecond
	renew := time.NewTicker(p.cfg.NATS.LeaseTTL / 3)
	defer renew.Stop()
	for {
		if pending == nil {
			select {
			case <-ctx.Done():
				return
			case <-renew.C:
				p.renewLease(ctx)
				continue
			case it := <-p.pubReq:
				pending = &it
			case <-p.pubFinal:
				select {
				case it := <-p.pubReq:
					pending = &it
				default:
					return // nothing left to publish
				}
			}
		}
		select {
		case it := <-p.pubReq:
			pending = &it
		default:
		}
		n, err := p.publishOnce(ctx, pending)
		if err == nil {
			p.publishFailed(nil)
			if p.lease != nil {
				p.leaseChanged(nil) // the publish renewed the lease (or took it over)
			}
			p.met.Publishes.Inc()
			p.mu.Lock()
			p.status.Published = n.Version
			p.met.Published.Set(float64(n.Version))
			p.mu.Unlock()
			p.tidyStore(ctx, n)
			// Debug: "snapshot persisted" is the one info line a snapshot gets.
			p.log.Debug().Uint64("version", n.Version).Str("object", n.Object).Int("bytes", n.Size).Msg("published")
			pending, backoff = nil, 500*time.Millisecond
			continue
		}
		var retry <-chan time.Time
		var final <-chan struct{} // standing by: the stop ends the loop at once
		if errors.Is(err, publish.ErrNotOwner) {
			// Standing by: the lease's renewal says when to try again.
			p.leaseChanged(err)
			final = p.pubFinal
		} else {
			p.met.PublishErrors.Inc()
			p.publishFailed(err)
			select {
			case <-p.pubFinal:
				// Stopping: one try. Retrying a NATS that does not answer
				// held every such stop for the whole shutdown_timeout.
				p.log.Warn().Err(err).Str("nats.url", publish.RedactURL(p.cfg.NATS.URL)).Msg("the final publish failed; the snapshot is on disk and is published at the next start")
				return
			default:
			}
			p.log.Warn().Err(err).Str("nats.url", publish.RedactURL(p.cfg.NATS.URL)).Int64("retry_in_ms", backoff.Milliseconds()).Msg("publish failed; the snapshot is safe on disk, retrying (check nats.url and that NATS answers)")
			retry = time.After(backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-final:
			// A standby publishes nothing at its stop either: its final
			// snapshot is on disk. Waiting for the lease here held every
			// stop of a standby for the whole shutdown_timeout.
			p.log.Info().Msg("stopping while another service owns the model name: nothing to publish; the final snapshot is on disk")
			return
		case it := <-p.pubReq:
			pending = &it
		case <-renew.C:
			p.renewLease(ctx) // standing by: then the pending version is tried again
		case <-retry:
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// publishFailed records a publish's outcome for /readyz: since when
// publishing has failed (zero once one succeeds) and why.
func (p *Pipeline) publishFailed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		p.pubDownSince, p.pubDownErr = time.Time{}, nil
	case p.pubDownSince.IsZero():
		p.pubDownSince, p.pubDownErr = time.Now(), err
	default:
		p.pubDownErr = err
	}
}

// renewLease renews (or, standing by, tries to take) the model name's
// lease, bounded by publishTimeout; it reports whether it is held.
func (p *Pipeline) renewLease(ctx context.Context) bool {
	if p.lease == nil {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	err := p.lease.Hold(lctx)
	p.leaseChanged(err)
	return err == nil
}

// leaseChanged records the outcome of a lease renewal (err nil: held).
// On a change it logs, counts and moves the NATS query service: it
// answers for the model only while this service owns the name, so that
// no reader gets two models' answers. The first time the lease is won,
// the operator's pin is restored.
func (p *Pipeline) leaseChanged(err error) {
	var other *publish.NotOwnerError
	switch {
	case err == nil:
	case errors.As(err, &other):
	default:
		// The KV bucket cannot be reached: nothing is known. The lease
		// is still ours until its TTL; publishing renews it first.
		p.log.Debug().Err(err).Msg("the model name's lease could not be renewed; retrying")
		return
	}
	p.mu.Lock()
	was, first := p.leaseOK, p.owner == nil && !p.leaseOK
	p.leaseOK, p.owner = err == nil, other
	p.mu.Unlock()
	if err == nil {
		p.met.LeaseHeld.Set(1)
	} else {
		p.met.LeaseHeld.Set(0)
	}
	switch {
	case err == nil && !was:
		if !first {
			p.met.LeaseChanges.Inc()
		}
		p.log.Info().Str("model", p.cfg.Model).Msg("this service owns the model name: publishing")
		if first {
			p.restorePin()
		}
		p.serveNATS(true)
	case err != nil && (was || first):
		if was {
			p.met.LeaseChanges.Inc()
		}
		p.log.Error().Err(err).Msg("another service publishes this model name; standing by (learning goes on, nothing is published)")
		p.serveNATS(false)
	}
}

// serveNATS registers the NATS query service (on) or stops it.
func (p *Pipeline) serveNATS(on bool) {
	if p.nc == nil {
		return
	}
	p.mu.Lock()
	svc := p.svc
	if !on {
		p.svc = nil
	}
	p.mu.Unlock()
	if !on {
		if svc != nil {
			svc.Stop()
		}
		return
	}
	if svc != nil {
		return
	}
	svc, err := serve.NewService(p.nc, p.svcCfg, &p.cur, serve.Limits{MaxVectors: p.cfg.HTTP.MaxVectors},
		serve.VersionOptions{Versions: p.versions, CanPin: p.cfg.NATS.AllowPin, OnPin: p.tellWatchers})
	if err != nil {
		p.log.Warn().Err(err).Msg("NATS query service not registered (NATS unreachable?); HTTP queries still work")
		return
	}
	p.mu.Lock()
	p.svc = svc
	p.mu.Unlock()
}

// publishTimeout bounds one publish of a small model, and what the lease,
// the first publish at start-up and a stop wait for; a call still running
// publishGrace after its bound is abandoned and the next attempt starts
// afresh, so that the publish loop can never hang on the network,
// whatever the client does.
const publishTimeout, publishGrace = 10 * time.Second, 5 * time.Second

// publishRate is the slowest link a publish's bound allows for: a model
// of size bytes has publishTimeout + size/publishRate (a 500 MB model:
// about 33 minutes). A link that stops moving bytes ends the put sooner
// (the backend's stall bound); before this, every publish of a model too
// large to cross the link in 10 s failed, and failed again at every
// retry.
const publishRate = 256 << 10

// publishBound is the bound of one publish of size bytes.
func publishBound(size int) time.Duration {
	return publishTimeout + time.Duration(float64(size)/publishRate*float64(time.Second))
}

func (p *Pipeline) publishOnce(ctx context.Context, it *pubItem) (publish.Notice, error) {
	bound := publishBound(len(it.data))
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	type result struct {
		n   publish.Notice
		err error
	}
	res := make(chan result, 1)
	// Owned by the pipeline (closeParts waits for it, within the stop's
	// deadline, after the NATS connection that would hold it is closed).
	p.owned.Go(func() {
		n, err := p.pub.Put(pctx, it.snap, it.data)
		res <- result{n, err}
	})
	select {
	case r := <-res:
		return r.n, r.err
	case <-ctx.Done():
		// A stop: the call has its context's end; nothing waits longer.
		return publish.Notice{}, fmt.Errorf("publish of version %d abandoned at the stop: %w", it.snap.Header.Version(), ctx.Err())
	case <-time.After(bound + publishGrace):
		p.pub.Reset()
		return publish.Notice{}, fmt.Errorf("publish of version %d did not return %v after its deadline; abandoned, retrying with fresh handles", it.snap.Header.Version(), publishGrace)
	}
}

// tidyStore prunes the versions readers no longer need after n was
// published, then records how full the object store is (the status
// page). It runs beside the publish loop, one at a time (a publish while
// one runs leaves its pruning to the next), bounded by publishTimeout:
// n is published already, and a store that stops answering now holds up
// neither its status nor the next version. Owned by the pipeline (see
// publishOnce).
func (p *Pipeline) tidyStore(ctx context.Context, n publish.Notice) {
	if !p.tidying.CompareAndSwap(false, true) {
		return
	}
	p.owned.Go(func() {
		defer p.tidying.Store(false)
		tctx, cancel := context.WithTimeout(ctx, publishTimeout)
		defer cancel()
		p.pub.Prune(tctx, n)
		p.readStoreUsage(tctx)
	})
}

// readStoreUsage records how full the object store is (the status page),
// bounded by a short timeout, and kept as it was when the store cannot
// say.
func (p *Pipeline) readStoreUsage(ctx context.Context) {
	uctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if u, ok, _ := p.pub.StoreUsage(uctx); ok {
		p.mu.Lock()
		p.status.Store = &u
		p.mu.Unlock()
	}
}
