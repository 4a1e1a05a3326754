package pipeline

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamkpca/streamkpca/ingest"
)

// TestClusterDropsStaleGenerations: a cluster member takes only messages
// read in the generation it joined, of partitions assigned to it. A
// message an earlier generation's reader queued, past the group's offset
// (the rows before it were dropped at the rejoin), would otherwise move
// the partition's offset over them: they would never be learned.
func TestClusterDropsStaleGenerations(t *testing.T) {
	p, err := New(Options{Config: testConfig(t), Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 16), DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	p.clu = &clusterState{ready: true, gen: 2, mine: map[int]bool{0: true}}
	p.coord = p.clu
	p.consumed[0] = 500 // the group's offset, set by the rejoin
	l := &loop{p: p}
	msg := func(partition int, offset int64, gen int32) parsed {
		return parsed{m: ingest.Message{Topic: "v", Partition: partition, Offset: offset, Value: []byte("1,2")}, x: []float64{1, 2}, gen: gen}
	}
	ctx := context.Background()
	for _, stale := range []parsed{msg(0, 520, 1), msg(1, 7, 2)} {
		if l.handle(ctx, stale) || l.rows != 0 {
			t.Fatalf("took partition %d offset %d of generation %d", stale.m.Partition, stale.m.Offset, stale.gen)
		}
	}
	if p.consumed[0] != 500 {
		t.Fatalf("partition 0 moved to %d by a stale message; the group's offset is 500", p.consumed[0])
	}
	if !l.handle(ctx, msg(0, 500, 2)) || l.rows != 1 || p.consumed[0] != 501 {
		t.Fatalf("the generation's own message: rows %d, offset %d", l.rows, p.consumed[0])
	}
}
