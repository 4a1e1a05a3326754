package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// OrphanGrace is how old the newest chunk of an unnamed object must be
// before CollectOrphans purges it: a put under way (this service's or
// another's, in a shared bucket) names its chunks only at its end, and no
// put takes this long (a stalled one is abandoned within a minute).
const OrphanGrace = 10 * time.Minute

// FullStoreOrphanGrace is OrphanGrace when a full store leaves nothing
// else to delete: a put whose chunks have not moved for this long was
// abandoned (the stall bound, 15 s by default, ends a put that does not
// move), so its chunks are no live put's, whoever wrote them.
const FullStoreOrphanGrace = time.Minute

// CollectOrphans purges the chunks no object names whose newest chunk is
// older than grace: those of puts cut short (a stop, a stall, a crash
// mid-publish), which the put's own clean-up could not remove with its
// context gone. They took storage until publishing stopped for room
// (issue 58: 17 MiB after a few SIGTERMs mid-publish). It returns the
// objects' worth of chunks purged.
func (b *NATSBackend) CollectOrphans(ctx context.Context, grace time.Duration) (int, error) {
	obs, _, err := b.handles(ctx)
	if err != nil {
		return 0, err
	}
	named := map[string]bool{}
	lst, err := obs.List(ctx, jetstream.ListObjectsShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, fmt.Errorf("publish: list %s: %w", b.cfg.ObjectBucket, err)
	}
	for _, o := range lst {
		if !o.Deleted {
			named[o.NUID] = true
		}
	}
	st, err := b.js.Stream(ctx, "OBJ_"+b.cfg.ObjectBucket)
	if err != nil {
		return 0, err
	}
	prefix := "$O." + b.cfg.ObjectBucket + ".C."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return 0, err
	}
	purged := 0
	for subject := range info.State.Subjects {
		nuid := strings.TrimPrefix(subject, prefix)
		if named[nuid] {
			continue
		}
		last, err := st.GetLastMsgForSubject(ctx, subject)
		if err != nil || time.Since(last.Time) < grace {
			continue
		}
		// A put that named this NUID since the list was read is younger
		// than grace: its chunks are not old.
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			return purged, err
		}
		purged++
	}
	return purged, nil
}
