package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produce writes n one-byte messages to topic's partition 0.
func produce(t *testing.T, c *kfake.Cluster, topic string, n int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(c.ListenAddrs()...), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: []byte{byte(i)}}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// recreate deletes topic and creates it again with one partition, empty.
func recreate(t *testing.T, c *kfake.Cluster, topic string) {
	t.Helper()
	conn, err := kafka.Dial("tcp", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.DeleteTopics(topic); err != nil {
		t.Fatal(err)
	}
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
}

// gapRun is a consumer of topic started with next for partition 0, and
// the gaps it reports.
type gapRun struct {
	cons *Consumer
	done chan error
	mu   sync.Mutex
	gaps []OffsetGap
}

func startGapRun(t *testing.T, ctx context.Context, c *kfake.Cluster, topic, rule string, next func() (int64, bool)) *gapRun {
	t.Helper()
	r := &gapRun{done: make(chan error, 1)}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	cons, err := NewConsumer(ConsumerConfig{Brokers: c.ListenAddrs(), Topic: topic, GroupID: "g", OutOfRange: rule, Logger: &log,
		OnGap: func(g OffsetGap) { r.mu.Lock(); r.gaps = append(r.gaps, g); r.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	r.cons = cons
	go func() { r.done <- cons.Run(ctx, func(string, int) (int64, bool) { return next() }) }()
	return r
}

// read fetches until n messages arrived and returns their offsets and the
// offsets that began a rewound batch.
func (r *gapRun) read(t *testing.T, ctx context.Context, n int) (offs, rewound []int64) {
	t.Helper()
	for len(offs) < n {
		b, err := r.cons.Fetch(ctx, n-len(offs))
		if err != nil {
			t.Fatalf("after %d of %d messages (offsets %v): %v", len(offs), n, offs, err)
		}
		if b.Rewound {
			rewound = append(rewound, b.Messages[0].Offset)
		}
		for _, m := range b.Messages {
			offs = append(offs, m.Offset)
		}
	}
	return offs, rewound
}

func (r *gapRun) gapsSeen() []OffsetGap {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]OffsetGap(nil), r.gaps...)
}

func wantRun(t *testing.T, offs []int64, from, n int64) {
	t.Helper()
	if int64(len(offs)) != n || offs[0] != from || offs[len(offs)-1] != from+n-1 {
		t.Fatalf("read offsets %v; want %d..%d", offs, from, from+n-1)
	}
}

// Defect (issue 58, item 8): a topic deleted and created again was read
// from the model's old offset, past its end: kafka-go waits there without
// a word (its "reading past the last offset" went to debug), so every new
// message below the old offset was skipped, lag 0. Now the start is
// checked against the partition's range: the gap is reported, and the
// partition read from its first offset with the rewind marked for the
// loop's duplicate filter.
func TestRecreatedTopicIsReadFromItsStart(t *testing.T) {
	c := kfakeTopic(t, "re", 1, 100)
	recreate(t, c, "re")
	produce(t, c, "re", 30)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := startGapRun(t, ctx, c, "re", "", func() (int64, bool) { return 100, true })
	offs, rewound := r.read(t, ctx, 30)
	wantRun(t, offs, 0, 30)
	if len(rewound) != 1 || rewound[0] != 0 {
		t.Errorf("rewound batches start at %v; want [0]", rewound)
	}
	g := r.gapsSeen()
	if len(g) != 1 || g[0].Kind != GapPastEnd || g[0].Next != 100 || g[0].End != 30 || g[0].First != 0 || g[0].Lost != 0 {
		t.Errorf("gaps %+v; want one past_end at next 100, end 30", g)
	}
}

// The rule fail ends Run with the gap, naming the partition and the
// setting; nothing is read.
func TestRecreatedTopicFailsUnderFail(t *testing.T) {
	c := kfakeTopic(t, "ref", 1, 50)
	recreate(t, c, "ref")
	produce(t, c, "ref", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := startGapRun(t, ctx, c, "ref", OutOfRangeFail, func() (int64, bool) { return 50, true })
	var gap *OffsetGapError
	select {
	case err := <-r.done:
		if !errors.As(err, &gap) || gap.Gap.Kind != GapPastEnd || gap.Gap.Partition != 0 || gap.Gap.Next != 50 {
			t.Fatalf("Run ended with %v; want the past_end gap of partition 0 at 50", err)
		}
		for _, w := range []string{"partition 0", "kafka.offset_out_of_range"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not say %q", err, w)
			}
		}
	case <-ctx.Done():
		t.Fatal("Run did not end under kafka.offset_out_of_range: fail")
	}
	if n := r.cons.Lag(); n != 0 {
		t.Errorf("%d messages queued; want none read", n)
	}
}

// A topic created again while the service reads it (caught up at its end)
// is found by the reader's own out-of-range answer and read from its
// first offset.
func TestTopicRecreatedWhileReadingIsReadAgain(t *testing.T) {
	c := kfakeTopic(t, "rr", 1, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := startGapRun(t, ctx, c, "rr", "", func() (int64, bool) { return 0, true })
	offs, _ := r.read(t, ctx, 40)
	wantRun(t, offs, 0, 40)
	recreate(t, c, "rr")
	produce(t, c, "rr", 15)
	offs, rewound := r.read(t, ctx, 15)
	wantRun(t, offs, 0, 15)
	if len(rewound) != 1 || rewound[0] != 0 {
		t.Errorf("rewound batches start at %v; want [0]", rewound)
	}
	if g := r.gapsSeen(); len(g) != 1 || g[0].Kind != GapPastEnd || g[0].Next != 40 {
		t.Errorf("gaps %+v; want one past_end at 40", g)
	}
}

// Messages removed by retention before the model read them are reported
// as lost (how many), and reading goes on from the first offset left; no
// rewind (the offsets still name the same messages).
func TestDeletedMessagesAreCountedAsLost(t *testing.T) {
	c := kfakeTopic(t, "del", 1, 100)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "del"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = 60
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records: %v %+v", err, resp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := startGapRun(t, ctx, c, "del", "", func() (int64, bool) { return 20, true })
	offs, rewound := r.read(t, ctx, 40)
	wantRun(t, offs, 60, 40)
	if len(rewound) != 0 {
		t.Errorf("rewound at %v; want none", rewound)
	}
	if g := r.gapsSeen(); len(g) != 1 || g[0].Kind != GapDeleted || g[0].Lost != 40 || g[0].First != 60 {
		t.Errorf("gaps %+v; want one deleted gap of 40 messages, first 60", g)
	}
}
