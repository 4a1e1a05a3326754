package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// nameRE is what a model name and a prefix may hold (they become NATS
// subject tokens).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// rosterEvery is how often a member repeats its announcement: members of
// a generation start at different moments, and core NATS keeps nothing
// for a subscriber that comes later.
const rosterEvery = 200 * time.Millisecond

// Announcement is what a member of a generation says of itself on the
// roster subject.
type Announcement struct {
	Generation int32  `json:"generation"`
	Member     string `json:"member"`
	Partitions []int  `json:"partitions"`
}

// Roster finds the members of one generation of a consumer group over
// NATS: each member announces the partitions Kafka assigned it on
// <prefix>.<model>.cluster.roster, again every 200 ms until Stop, and the
// roster is complete when the announcements of the generation cover every
// partition of the topic. Membership stays Kafka's: the roster only tells
// each member who else got partitions in the same generation.
type Roster struct {
	nc   *nats.Conn
	subj string
	self Announcement
	sub  *nats.Subscription

	mu      sync.Mutex
	seen    map[string][]int
	changed chan struct{}

	stop chan struct{}
	done chan struct{}
}

// StartRoster subscribes to the roster subject and starts announcing self.
func StartRoster(nc *nats.Conn, prefix, model string, self Announcement) (*Roster, error) {
	if prefix == "" {
		prefix = "streamkpca"
	}
	if !nameRE.MatchString(model) {
		return nil, fmt.Errorf("transport: roster: model name %q must be letters, digits, '-' or '_'", model)
	}
	r := &Roster{nc: nc, subj: prefix + "." + model + ".cluster.roster", self: self,
		seen: map[string][]int{}, changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	msg, err := json.Marshal(self)
	if err != nil {
		return nil, err
	}
	r.sub, err = nc.Subscribe(r.subj, r.receive)
	if err != nil {
		return nil, fmt.Errorf("transport: roster: subscribe to %s: %w", r.subj, err)
	}
	r.note(self)
	go func() {
		defer close(r.done)
		t := time.NewTicker(rosterEvery)
		defer t.Stop()
		for {
			_ = nc.Publish(r.subj, msg) // lost: the next one goes out in 200 ms
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
	return r, nil
}

func (r *Roster) receive(m *nats.Msg) {
	var a Announcement
	if json.Unmarshal(m.Data, &a) != nil || a.Generation != r.self.Generation || a.Member == "" {
		return // another generation's, or not an announcement
	}
	r.note(a)
}

func (r *Roster) note(a Announcement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[a.Member]; ok {
		return
	}
	r.seen[a.Member] = a.Partitions
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Uncovered returns the partitions of 0 … partitions−1 that no
// announcement has covered yet.
func (r *Roster) Uncovered(partitions int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	covered := make([]bool, partitions)
	for _, ps := range r.seen {
		for _, p := range ps {
			if p >= 0 && p < partitions {
				covered[p] = true
			}
		}
	}
	var out []int
	for p, c := range covered {
		if !c {
			out = append(out, p)
		}
	}
	return out
}

// Wait returns, once the announcements cover partitions 0 … partitions−1,
// the ids of the members with at least one partition, sorted (this
// member's among them only if it has partitions), or ctx's error.
func (r *Roster) Wait(ctx context.Context, partitions int) ([]string, error) {
	for {
		if len(r.Uncovered(partitions)) == 0 {
			r.mu.Lock()
			var members []string
			for id, ps := range r.seen {
				if len(ps) > 0 {
					members = append(members, id)
				}
			}
			r.mu.Unlock()
			slices.Sort(members)
			return members, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("transport: roster of generation %d: %w", r.self.Generation, ctx.Err())
		case <-r.changed:
		}
	}
}

// Stop stops announcing and unsubscribes.
func (r *Roster) Stop() {
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	<-r.done
	_ = r.sub.Unsubscribe()
}
