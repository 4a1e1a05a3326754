package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LeaseKey is the KV key of a model's ownership lease.
func LeaseKey(model string) string { return model + ".owner" }

// Owner is the value of a lease key: who publishes the model.
type Owner struct {
	// ID names the owner: the model's incarnation for a service on its
	// own, "group:<kafka group>" for the members of a cluster (they own
	// the model together). A service restarted on its snapshot.dir keeps
	// its incarnation, so it takes its own lease back at once.
	ID   string `json:"id"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// Dir identifies the directory the owner keeps its model in (a
	// service's snapshot.dir: its host, device and inode; empty in a
	// cluster, whose members share the ID by design). A copy of the
	// directory — a restored backup, a cloned volume — is another
	// directory with the same incarnation: while the owner's lease is
	// live the copy is refused as another owner (Copy in NotOwnerError),
	// never a second writer of the incarnation's versions.
	Dir string `json:"dir,omitempty"`
	// TTL is the owner's lease period: a lease not renewed for that long
	// (as the contender's clock measures it) has lapsed.
	TTL time.Duration `json:"ttl"`
	// Renewed is the owner's clock at its last renewal (for people: the
	// lapse is measured on the contender's clock, never from this).
	Renewed time.Time `json:"renewed"`
	// Released marks a lease given up at a clean stop: anyone takes it.
	Released bool `json:"released,omitempty"`
}

// ErrNotOwner is the error (wrapped by a *NotOwnerError) of a publish,
// pin or lease renewal refused because another live service owns the
// model's name.
var ErrNotOwner = errors.New("publish: another live service owns this model name")

// NotOwnerError says who owns the model and when its lease lapses if it
// is not renewed.
type NotOwnerError struct {
	Model string
	Owner Owner
	// LapsesIn is how long the owner's lease has left unless it is
	// renewed (this process's clock).
	LapsesIn time.Duration
	// Copy: the owner has this service's ID (incarnation) but another
	// directory: one of the two runs on a copy of the other's
	// snapshot.dir.
	Copy bool
}

func (e *NotOwnerError) Error() string {
	if e.Copy {
		return fmt.Sprintf("publish: model %q, incarnation %s, is published from another directory (%s, host %q, pid %d, renewed %s): this snapshot.dir is a copy of that one (a restored backup, a cloned volume) or the reverse; this service stands by and publishes nothing while that lease lives (it lapses in %v without renewal): give each service its own snapshot.dir",
			e.Model, e.Owner.ID, e.Owner.Dir, e.Owner.Host, e.Owner.PID, e.Owner.Renewed.UTC().Format(time.RFC3339), e.LapsesIn.Round(time.Second))
	}
	return fmt.Sprintf("publish: model %q is owned by %s (host %q, pid %d, renewed %s); this service stands by and publishes nothing unless that lease lapses (in %v without renewal): give each service its own model name",
		e.Model, e.Owner.ID, e.Owner.Host, e.Owner.PID, e.Owner.Renewed.UTC().Format(time.RFC3339), e.LapsesIn.Round(time.Second))
}

func (e *NotOwnerError) Unwrap() error { return ErrNotOwner }

// Lease is one service's claim to a model name: one owner publishes a
// model at a time. The owner renews the lease key (LeaseKey) by
// compare-and-swap on its revision; anyone else waits until the key has
// not changed for the owner's TTL as its own clock measures it (no
// clocks need agree) and then takes it by the same compare-and-swap, so
// of two contenders one wins. An owner that was frozen past its TTL
// finds the revision changed at its next renewal and stops publishing:
// Publisher.Publish renews before it writes anything.
type Lease struct {
	b     Backend
	model string
	me    Owner
	now   func() time.Time

	// op is held across a renewal's or a release's network calls, taken
	// with the caller's context (a call that never returns holds up the
	// others only until their contexts end); mu guards the fields below
	// for the moments Held and generation read them.
	op     chan struct{}
	mu     sync.Mutex
	rev    uint64    // revision of our last write; 0 when not held
	heldAt time.Time // when that write succeeded (our clock)
	// gen counts the times the lease was taken (not renewed): writes
	// fenced on a key's revision (Publisher's fence) read the key again
	// when it changes.
	gen    uint64
	seen   uint64 // another owner's revision, first seen at seenAt
	seenAt time.Time
}

// NewLease returns a lease on model's name for me (ID and TTL required).
// now is the clock (time.Now when nil).
func NewLease(b Backend, model string, me Owner, now func() time.Time) (*Lease, error) {
	if me.ID == "" || me.TTL <= 0 {
		return nil, fmt.Errorf("publish: a lease needs an owner id and a positive ttl (got %q, %v)", me.ID, me.TTL)
	}
	if now == nil {
		now = time.Now
	}
	return &Lease{b: b, model: model, me: me, now: now, op: make(chan struct{}, 1)}, nil
}

// lock takes the lease's operation lock, or gives up when ctx ends.
func (l *Lease) lock(ctx context.Context) error {
	select {
	case l.op <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish: the lease of %s is busy with a call that has not returned: %w", l.model, ctx.Err())
	}
}

func (l *Lease) unlock() { <-l.op }

// Hold renews the lease, or takes it when it is unset, released, has
// this owner's ID or has lapsed. It returns a *NotOwnerError while
// another owner's lease is live, and the backend's error when the key
// cannot be read or written (the lease is then held only until its TTL
// from the last renewal: see Held).
func (l *Lease) Hold(ctx context.Context) error {
	if err := l.lock(ctx); err != nil {
		return err
	}
	defer l.unlock()
	for try := 0; ; try++ {
		err := l.hold(ctx)
		if !errors.Is(err, ErrConflict) || try == 2 {
			return err
		}
		// Someone wrote between our read and our swap: read again (a
		// member of our own group renewing is ours too).
	}
}

func (l *Lease) hold(ctx context.Context) error {
	now := l.now()
	v, rev, err := l.b.GetKeyRevision(ctx, LeaseKey(l.model))
	var cur Owner
	switch {
	case errors.Is(err, ErrNotFound):
		rev = 0
	case err != nil:
		return fmt.Errorf("publish: read the lease of %s: %w", l.model, err)
	case json.Unmarshal(v, &cur) != nil || cur.ID == "":
		cur = Owner{ID: "(unreadable lease)", TTL: l.me.TTL}
	}
	copied := cur.ID == l.me.ID && cur.Dir != "" && l.me.Dir != "" && cur.Dir != l.me.Dir
	if rev != 0 && !cur.Released && (cur.ID != l.me.ID || copied) {
		l.mu.Lock()
		l.rev = 0
		l.mu.Unlock()
		if rev != l.seen {
			l.seen, l.seenAt = rev, now
		}
		ttl := max(cur.TTL, l.me.TTL)
		if left := ttl - now.Sub(l.seenAt); left > 0 {
			return &NotOwnerError{Model: l.model, Owner: cur, LapsesIn: left, Copy: copied}
		}
		// Unchanged for its TTL: lapsed; take it (one contender wins).
	}
	me := l.me
	me.Renewed = now.UTC()
	js, _ := json.Marshal(me)
	n, err := l.b.SwapKey(ctx, LeaseKey(l.model), js, rev)
	if err != nil {
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("publish: renew the lease of %s: %w", l.model, err)
		}
		return err
	}
	l.mu.Lock()
	if l.rev == 0 {
		l.gen++
	}
	l.rev, l.heldAt = n, now
	l.mu.Unlock()
	return nil
}

// generation returns how many times the lease was taken, 0 while it is
// not held.
func (l *Lease) generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		return 0
	}
	return l.gen
}

// Held reports whether the lease was held at its last renewal and that
// renewal is younger than the TTL.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && l.now().Sub(l.heldAt) < l.me.TTL
}

// Release gives the lease up (at a clean stop), so that a successor
// takes it at once; a no-op when it is not held.
func (l *Lease) Release(ctx context.Context) error {
	if err := l.lock(ctx); err != nil {
		return err
	}
	defer l.unlock()
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if rev == 0 {
		return nil
	}
	me := l.me
	me.Released, me.Renewed = true, l.now().UTC()
	js, _ := json.Marshal(me)
	_, err := l.b.SwapKey(ctx, LeaseKey(l.model), js, rev)
	l.mu.Lock()
	l.rev = 0
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("publish: release the lease of %s: %w", l.model, err)
	}
	return nil
}
