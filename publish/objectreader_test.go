package publish

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// natsObjects returns a writer's backend on a new embedded server, and
// a JetStream handle on the same server.
func natsObjects(t *testing.T) (*NATSBackend, jetstream.JetStream) {
	t.Helper()
	nc := testkit.NATS(t, nil)
	b, err := NewNATSBackend(nc, Config{Model: "obj"}, true)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return b, js
}

// An object whose chunks were changed after its put (a store's bytes
// rotting, a hand at the stream) is read as far as it goes, and its
// reader ends in ErrCorrupt, not io.EOF.
func TestObjectReaderChecksTheDigestAtTheEnd(t *testing.T) {
	b, js := natsObjects(t)
	data := bytes.Repeat([]byte("streamkpca"), 30_000) // 300 kB: three chunks
	rotten := bytes.Clone(data)
	rotten[len(rotten)-1] ^= 1
	putThenReplaceChunks(t, b, js, "o", data, rotten)
	rc, err := b.GetObject(t.Context(), "o")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, ErrCorrupt) || len(got) != len(data) {
		t.Fatalf("read %d of %d bytes, ending in %v; want them all, then ErrCorrupt", len(got), len(data), err)
	}
}

// A reader of versions takes one only once its digest is checked, at
// the end of the object: chunks replaced by another whole, valid
// snapshot of the same size (version 2 stored as version 1's bytes)
// decode, and are still refused.
func TestReadVersionWaitsForTheDigest(t *testing.T) {
	b, js := natsObjects(t)
	_, v1 := testkit.Golden(t, 1)
	_, v2 := testkit.Golden(t, 2)
	if len(v1) != len(v2) || bytes.Equal(v1, v2) {
		t.Fatalf("golden versions 1 and 2: %d and %d bytes; the test needs two of one size", len(v1), len(v2))
	}
	putThenReplaceChunks(t, b, js, "o", v1, v2)
	if _, _, err := readVersion(t.Context(), b, Notice{Object: "o"}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("readVersion of an object whose chunks were replaced: %v, want ErrCorrupt", err)
	}
	if err := b.PutObject(t.Context(), "o", nil, bytes.NewReader(v2)); err != nil {
		t.Fatal(err)
	}
	if m, n, err := readVersion(t.Context(), b, Notice{Object: "o"}); err != nil || m.Header().Version() != 2 || n.Size != len(v2) {
		t.Fatalf("readVersion of version 2 stored whole: %v, size %d; want version 2 of %d bytes", err, n.Size, len(v2))
	}
}

// putThenReplaceChunks puts data under name, then replaces the chunks
// of its stream by those of other (the object's recorded size and
// digest stay data's).
func putThenReplaceChunks(t *testing.T, b *NATSBackend, js jetstream.JetStream, name string, data, other []byte) {
	t.Helper()
	ctx := t.Context()
	if err := b.PutObject(ctx, name, nil, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	obs, _, _ := b.handles(ctx)
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	subj := "$O." + b.cfg.ObjectBucket + ".C." + info.NUID
	st, err := js.Stream(ctx, "OBJ_"+b.cfg.ObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		t.Fatal(err)
	}
	const chunk = 128 << 10
	for c := other; len(c) > 0; c = c[min(len(c), chunk):] {
		if _, err := js.Publish(ctx, subj, c[:min(len(c), chunk)]); err != nil {
			t.Fatal(err)
		}
	}
}

// The stall bound is the link's: a reader that takes longer than it
// between two reads (a decoder, a slow disk) is not cut off, while a
// wait for a chunk that does not come is (TestStalledTransferEnds).
func TestObjectReaderWaitsForItsCaller(t *testing.T) {
	b, _ := natsObjects(t)
	b.stall = 300 * time.Millisecond
	ctx := t.Context()
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 45_000) // three chunks
	if err := b.PutObject(ctx, "o", nil, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	rc, err := b.GetObject(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []byte
	buf := make([]byte, 128<<10)
	for {
		n, err := rc.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		time.Sleep(2 * b.stall)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d put", len(got), len(data))
	}
	if _, err := rc.Read(buf); err != io.EOF {
		t.Fatalf("a read after the end: %v, want io.EOF again", err)
	}
}

// A put made of small reads is stored in full chunks (the object store
// makes a chunk of each read it is given).
func TestPutMakesFullChunks(t *testing.T) {
	b, _ := natsObjects(t)
	ctx := t.Context()
	data := bytes.Repeat([]byte("0123456789abcdef"), 20_000) // 320 kB
	if err := b.PutObject(ctx, "o", nil, &smallReads{data: data, n: 1000}); err != nil {
		t.Fatal(err)
	}
	obs, _, _ := b.handles(ctx)
	info, err := obs.GetInfo(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	if want := (len(data) + 128<<10 - 1) / (128 << 10); info.Chunks != uint32(want) || info.Size != uint64(len(data)) {
		t.Fatalf("%d chunks of %d bytes in all; want %d of at most 128 KiB", info.Chunks, info.Size, want)
	}
}

// smallReads returns at most n bytes a read.
type smallReads struct {
	data []byte
	n    int
}

func (r *smallReads) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.data)
	r.data = r.data[k:]
	return k, nil
}

// Defect: the object store's Put publishes every chunk of an object
// before it waits for one acknowledgement, and a stream takes in at
// most StreamMaxBufferedSize bytes at once (128 MiB by default): a model
// larger than that was refused ("too many requests") whenever the
// server fell behind — once in eight 500 MB publishes to a server in
// the same process (`streamkpca bench publish`). A put now keeps at most
// its window of bytes awaiting acknowledgement. Here the server takes
// in 1 MiB at once and the window is half that.
func TestPutStaysWithinTheStreamsIntake(t *testing.T) {
	nc := testkit.NATS(t, func(o *server.Options) { o.StreamMaxBufferedSize = 1 << 20 })
	b, err := NewNATSBackend(nc, Config{Model: "obj"}, true)
	if err != nil {
		t.Fatal(err)
	}
	b.window = 512 << 10
	data := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB
	for i := 1; i <= 2; i++ {                               // the second replaces the first
		if err := b.PutObject(t.Context(), "big", nil, bytes.NewReader(data)); err != nil {
			t.Fatalf("put %d of %d MiB into a stream that takes in 1 MiB at once: %v", i, len(data)>>20, err)
		}
	}
	got, err := getAll(b, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes (%v), want the %d put", len(got), err, len(data))
	}
	u, err := b.StoreUsage(t.Context())
	if err != nil || u.Bytes > uint64(len(data))+64<<10 {
		t.Fatalf("the store holds %d bytes (%v) after a put replaced an object of %d: the old chunks were not purged", u.Bytes, err, len(data))
	}
}

// sizeAsked is a MemBackend whose object readers record whether their
// Size was asked for.
type sizeAsked struct {
	*MemBackend
	asked *bool
}

func (b sizeAsked) GetObject(ctx context.Context, name string) (io.ReadCloser, error) {
	rc, err := b.MemBackend.GetObject(ctx, name)
	if err != nil {
		return nil, err
	}
	return askedReader{rc.(memReader), b.asked}, nil
}

type askedReader struct {
	memReader
	asked *bool
}

func (r askedReader) Size() int64 { *r.asked = true; return r.memReader.Size() }

// A reader of versions hands the object's size on to the snapshot
// decoder (which then decodes the coefficients into room made at once,
// holding a large model about once: snapshot's
// TestReadFromASizedReaderHoldsTheModelOnce), through the digest's tee.
func TestReadVersionGivesTheDecoderTheSize(t *testing.T) {
	var asked bool
	b := sizeAsked{NewMemBackend(), &asked}
	_, data := testkit.Golden(t, 3)
	if err := b.PutObject(t.Context(), "o", nil, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	m, n, err := readVersion(t.Context(), b, Notice{Object: "o"})
	if err != nil || m.Header().Version() != 3 || n.Size != len(data) {
		t.Fatalf("readVersion: %v, size %d; want version 3 of %d bytes", err, n.Size, len(data))
	}
	if !asked {
		t.Error("the decoder was not given the object's size")
	}
}
