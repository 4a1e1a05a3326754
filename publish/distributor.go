package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/snapshot"
)

// Timeout bounds one publish of a small model, and what the lease, the
// first publish at start-up and a stop wait for; a call still running
// Grace after its bound is abandoned and the next attempt starts afresh,
// so that a Distributor can never hang on the network, whatever the
// backend does.
const Timeout, Grace = 10 * time.Second, 5 * time.Second

// slowestLink is the slowest link a publish's bound allows for: a model
// of size bytes has Timeout + size/slowestLink (a 500 MB model: about 33
// minutes). A link that stops moving bytes ends the put sooner (the
// backend's stall bound); before this, every publish of a model too
// large to cross the link in 10 s failed, and failed again at every
// retry.
const slowestLink = 256 << 10

// publishBound is the bound of one publish of size bytes.
func publishBound(size int) time.Duration {
	return Timeout + time.Duration(float64(size)/slowestLink*float64(time.Second))
}

// Hooks tell a Distributor's owner what happened; each is optional and
// called on the Distributor's goroutines, never under its lock.
type Hooks struct {
	// Published: version n is published (the lease renewed with it).
	Published func(n Notice)
	// Failed: a publish failed for another reason than the lease.
	Failed func(err error)
	// Ownership: the lease was won (held) or lost. first is the first
	// outcome known (at start-up: nothing was held before, and losing
	// is not a change); the owner serves queries only while it holds.
	Ownership func(held, first bool)
	// Usage: how full the object store is, after a publish.
	Usage func(u StoreUsage)
}

// Distributor carries a service's persisted versions to their readers:
// Run publishes the newest version Offered to it (a newer one supersedes
// one pending), retrying with backoff while the backend is unreachable,
// renews the model name's lease (a standby publishes nothing until the
// lease is its own), and prunes what readers no longer need after a
// publish. Its goroutine's life is Run's; Final ends it once what is
// pending is published, and Wait waits for the calls it abandoned. A nil
// *Distributor (nothing to publish to) publishes nothing and says so.
type Distributor struct {
	pub              *Publisher
	lease            *Lease // nil: no lease (nothing to fence)
	renew            time.Duration
	setting, address string // the backend, for logs: its setting and its address (credentials removed)
	log              zerolog.Logger
	on               Hooks

	req       chan offered
	final     chan struct{}
	finalOnce sync.Once
	// owned holds the calls that outlive the call that started them (a
	// publish abandoned after its deadline, the prune after a publish);
	// tidying says a prune runs.
	owned   sync.WaitGroup
	tidying atomic.Bool

	mu        sync.Mutex
	downSince time.Time // since when publishing has failed (zero while it works)
	downErr   error
	held      bool
	other     *NotOwnerError // who owns the name while this one stands by
}

type offered struct {
	snap *snapshot.Snapshot
	data []byte
}

// DistributorConfig is a Distributor's: the lease's owner (a zero ID:
// no lease) and, for the logs of a backend that does not answer, the
// setting to check and its address (credentials removed: RedactURL).
type DistributorConfig struct {
	Owner            Owner
	Setting, Address string // e.g. "nats.url", "nats://host:4222"
}

// NewDistributor returns a Distributor of pub's versions; with an owner
// it takes the model name's lease (see Publisher.Own) and renews it
// every third of its TTL. Nothing runs until Run; Renew tries the lease
// at once.
func NewDistributor(pub *Publisher, cfg DistributorConfig, log zerolog.Logger, on Hooks) (*Distributor, error) {
	if cfg.Setting == "" {
		cfg.Setting = "the backend"
	}
	d := &Distributor{pub: pub, setting: cfg.Setting, address: cfg.Address, log: log, on: on, req: make(chan offered, 1), final: make(chan struct{}), renew: time.Hour}
	if cfg.Owner.ID != "" {
		l, err := pub.Own(cfg.Owner, nil)
		if err != nil {
			return nil, err
		}
		d.lease, d.renew = l, cfg.Owner.TTL/3
	}
	return d, nil
}

// Publisher is the publisher the Distributor publishes with (pins).
func (d *Distributor) Publisher() *Publisher { return d.pub }

// Offer hands a persisted snapshot over for publishing, replacing one
// still pending: only the newest matters. It never waits.
func (d *Distributor) Offer(snap *snapshot.Snapshot, data []byte) {
	if d == nil {
		return
	}
	select {
	case <-d.req:
	default:
	}
	d.req <- offered{snap: snap, data: data}
}

// Final asks Run to publish what is pending and end (a standby ends at
// once: its final snapshot is on disk). Safe to call more than once.
func (d *Distributor) Final() {
	if d != nil {
		d.finalOnce.Do(func() { close(d.final) })
	}
}

// Down says since when publishing has failed and why (zero while it
// works).
func (d *Distributor) Down() (time.Time, error) {
	if d == nil {
		return time.Time{}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.downSince, d.downErr
}

// StandingBy is the live owner of the model name while this service
// stands by, nil while it owns the name (or nothing is known).
func (d *Distributor) StandingBy() *Owner {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.other == nil {
		return nil
	}
	o := d.other.Owner
	return &o
}

// Run publishes until ctx ends or, after Final, nothing is pending.
func (d *Distributor) Run(ctx context.Context) {
	if d == nil {
		return
	}
	var pending *offered
	backoff := 500 * time.Millisecond
	renew := time.NewTicker(d.renew)
	defer renew.Stop()
	for {
		if pending == nil {
			select {
			case <-ctx.Done():
				return
			case <-renew.C:
				d.Renew(ctx)
				continue
			case it := <-d.req:
				pending = &it
			case <-d.final:
				select {
				case it := <-d.req:
					pending = &it
				default:
					return // nothing left to publish
				}
			}
		}
		select {
		case it := <-d.req:
			pending = &it
		default:
		}
		n, err := d.publishOnce(ctx, pending)
		if err == nil {
			d.failed(nil)
			if d.lease != nil {
				d.leaseChanged(nil) // the publish renewed the lease (or took it over)
			}
			if d.on.Published != nil {
				d.on.Published(n)
			}
			d.tidy(ctx, n)
			// Debug: "snapshot persisted" is the one info line a snapshot gets.
			d.log.Debug().Uint64("version", n.Version).Str("object", n.Object).Int("bytes", n.Size).Msg("published")
			pending, backoff = nil, 500*time.Millisecond
			continue
		}
		var retry <-chan time.Time
		var final <-chan struct{} // standing by: the stop ends the loop at once
		if errors.Is(err, ErrNotOwner) {
			// Standing by: the lease's renewal says when to try again.
			d.leaseChanged(err)
			final = d.final
		} else {
			d.failed(err)
			if d.on.Failed != nil {
				d.on.Failed(err)
			}
			select {
			case <-d.final:
				// Stopping: one try. Retrying a backend that does not
				// answer held every such stop for the whole
				// shutdown_timeout.
				d.log.Warn().Err(err).Str(d.setting, d.address).Msg("the final publish failed; the snapshot is on disk and is published at the next start")
				return
			default:
			}
			d.log.Warn().Err(err).Str(d.setting, d.address).Int64("retry_in_ms", backoff.Milliseconds()).Msg("publish failed; the snapshot is safe on disk, retrying (check " + d.setting + " and that it answers)")
			retry = time.After(backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-final:
			// A standby publishes nothing at its stop either: its final
			// snapshot is on disk. Waiting for the lease here held every
			// stop of a standby for the whole shutdown_timeout.
			d.log.Info().Msg("stopping while another service owns the model name: nothing to publish; the final snapshot is on disk")
			return
		case it := <-d.req:
			pending = &it
		case <-renew.C:
			d.Renew(ctx) // standing by: then the pending version is tried again
		case <-retry:
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// failed records a publish's outcome for Down.
func (d *Distributor) failed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err == nil:
		d.downSince, d.downErr = time.Time{}, nil
	case d.downSince.IsZero():
		d.downSince, d.downErr = time.Now(), err
	default:
		d.downErr = err
	}
}

// Renew renews (or, standing by, tries to take) the model name's lease,
// bounded by Timeout; it reports whether it is held (true without a
// lease).
func (d *Distributor) Renew(ctx context.Context) bool {
	if d.lease == nil {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	err := d.lease.Hold(lctx)
	d.leaseChanged(err)
	return err == nil
}

// leaseChanged records the outcome of a lease renewal (err nil: held)
// and, on a change, logs it and tells Hooks.Ownership: the owner
// answers queries for the model only while it owns the name, so that no
// reader gets two models' answers.
func (d *Distributor) leaseChanged(err error) {
	var other *NotOwnerError
	switch {
	case err == nil:
	case errors.As(err, &other):
	default:
		// The bucket cannot be reached: nothing is known. The lease is
		// still ours until its TTL; publishing renews it first.
		d.log.Debug().Err(err).Msg("the model name's lease could not be renewed; retrying")
		return
	}
	d.mu.Lock()
	was, first := d.held, d.other == nil && !d.held
	d.held, d.other = err == nil, other
	d.mu.Unlock()
	switch {
	case err == nil && !was:
		d.log.Info().Str("model", d.pub.cfg.Model).Msg("this service owns the model name: publishing")
	case err != nil && (was || first):
		d.log.Error().Err(err).Msg("another service publishes this model name; standing by (learning goes on, nothing is published)")
	default:
		return
	}
	if d.on.Ownership != nil {
		d.on.Ownership(err == nil, first)
	}
}

// Release gives the model name up (a clean stop: a successor takes it
// at once); nothing without a lease.
func (d *Distributor) Release(ctx context.Context) error {
	if d == nil || d.lease == nil {
		return nil
	}
	return d.lease.Release(ctx)
}

func (d *Distributor) publishOnce(ctx context.Context, it *offered) (Notice, error) {
	bound := publishBound(len(it.data))
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	type result struct {
		n   Notice
		err error
	}
	res := make(chan result, 1)
	// Owned (Wait waits for it, after the connection that would hold it
	// is closed).
	d.owned.Go(func() {
		n, err := d.pub.Put(pctx, it.snap, it.data)
		res <- result{n, err}
	})
	select {
	case r := <-res:
		return r.n, r.err
	case <-ctx.Done():
		// A stop: the call has its context's end; nothing waits longer.
		return Notice{}, fmt.Errorf("publish of version %d abandoned at the stop: %w", it.snap.Header.Version(), ctx.Err())
	case <-time.After(bound + Grace):
		d.pub.Reset()
		return Notice{}, fmt.Errorf("publish of version %d did not return %v after its deadline; abandoned, retrying with fresh handles", it.snap.Header.Version(), Grace)
	}
}

// tidy prunes the versions readers no longer need after n was
// published, then reads how full the object store is (Hooks.Usage). It
// runs beside Run, one at a time (a publish while one runs leaves its
// pruning to the next), bounded by Timeout: n is published already, and
// a store that stops answering now holds up neither its usage nor the
// next version.
func (d *Distributor) tidy(ctx context.Context, n Notice) {
	if !d.tidying.CompareAndSwap(false, true) {
		return
	}
	d.owned.Go(func() {
		defer d.tidying.Store(false)
		tctx, cancel := context.WithTimeout(ctx, Timeout)
		defer cancel()
		d.pub.Prune(tctx, n)
		uctx, cancel := context.WithTimeout(tctx, 2*time.Second)
		defer cancel()
		if u, ok, _ := d.pub.StoreUsage(uctx); ok && d.on.Usage != nil {
			d.on.Usage(u)
		}
	})
}

// Wait waits for the calls Run abandoned or left running (a publish
// past its deadline, a prune) until ctx ends; it reports whether they
// all returned.
func (d *Distributor) Wait(ctx context.Context) bool {
	if d == nil {
		return true
	}
	done := make(chan struct{})
	go func() { d.owned.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
