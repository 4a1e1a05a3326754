package publish

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// cutReader gives n bytes, then ends its put's context and fails: a put
// cut short by a stop, whose own clean-up then cannot run.
type cutReader struct {
	left   int
	cancel context.CancelFunc
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		r.cancel()
		return 0, errors.New("stopped mid-publish")
	}
	n := min(len(p), r.left)
	r.left -= n
	return n, nil
}

// chunkSubjects returns the object bucket's chunk subjects.
func chunkSubjects(t *testing.T, b *NATSBackend) map[string]uint64 {
	t.Helper()
	st, err := b.js.Stream(context.Background(), "OBJ_"+b.cfg.ObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter("$O."+b.cfg.ObjectBucket+".C.>"))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// Defect (issue 58, item 3): a put cut short by a stop or a stall left
// its chunks (its purge needs the context it lost), and nothing collected
// chunks no object names: 17 MiB of them after a few SIGTERMs
// mid-publish, until the store was full. CollectOrphans purges them once
// older than its grace, and leaves every named object whole.
func TestCollectOrphansPurgesCutShortPuts(t *testing.T) {
	nc := testkit.NATS(t, nil)
	b, err := NewNATSBackend(nc, Config{Model: "m"}, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	whole := bytes.Repeat([]byte("w"), 3*chunkSize+7)
	if err := b.PutObject(ctx, "m/whole", nil, bytes.NewReader(whole)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cctx, cancel := context.WithCancel(ctx)
		if err := b.PutObject(cctx, "m/cut", nil, &cutReader{left: 3 * chunkSize, cancel: cancel}); err == nil {
			t.Fatal("the cut-short put succeeded")
		}
	}
	if n := len(chunkSubjects(t, b)); n != 3 {
		t.Fatalf("%d chunk subjects after one whole put and two cut short; want 3 (the test needs the orphans)", n)
	}
	if n, err := b.CollectOrphans(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("orphans younger than the grace: %d purged (%v); want none", n, err)
	}
	if n, err := b.CollectOrphans(ctx, 0); err != nil || n != 2 {
		t.Fatalf("CollectOrphans: %d purged (%v); want the 2 cut-short puts", n, err)
	}
	if n := len(chunkSubjects(t, b)); n != 1 {
		t.Errorf("%d chunk subjects left; want the whole object's", n)
	}
	rc, err := b.GetObject(ctx, "m/whole")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, whole) {
		t.Errorf("the named object after the collection: %d bytes (%v); want it whole", len(got), err)
	}
}
