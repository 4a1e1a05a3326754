// Package outputtest is the conformance suite every output.Producer
// passes: the Kafka producer (against an in-process broker) and the
// in-memory one the run loop's tests use.
package outputtest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/output"
)

// Factory returns a new producer and a function that reads back every
// message it stored, in store order within each output partition (the
// order across partitions is free).
type Factory func(t *testing.T) (output.Producer, func() []output.Message)

// Run runs every conformance test against producers from f.
func Run(t *testing.T, f Factory) {
	t.Run("StoresEveryRecordInOrder", func(t *testing.T) { storesInOrder(t, f) })
	t.Run("EmptyWriteStoresNothing", func(t *testing.T) { emptyWrite(t, f) })
	t.Run("WriteEndsWithItsContext", func(t *testing.T) { endsWithContext(t, f) })
}

func record(p int, o int64) output.Record {
	return output.Record{Source: output.Source{Topic: "in", Partition: p, Offset: o}, HasModel: true, Incarnation: "i1", Version: 7,
		Projection: []float64{float64(o), -1.5e-300}, Residual: 0.25, Novelty: 0.5}
}

// storesInOrder: three writes over four source partitions are stored
// whole (key, value, headers), each source partition's in offset order.
func storesInOrder(t *testing.T, f Factory) {
	p, read := f(t)
	defer p.Close()
	var want []output.Message
	for w := range 3 {
		var ms []output.Message
		for o := int64(w * 10); o < int64(w*10+10); o++ {
			r := record(int(o%4), o)
			ms = append(ms, r.Encode())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.Write(ctx, ms)
		cancel()
		if err != nil {
			t.Fatalf("write %d: %v", w, err)
		}
		want = append(want, ms...)
	}
	// Stored means readable: a little grace for a reader's own lag.
	var got []output.Message
	deadline := time.Now().Add(3 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		got = read()
		if len(got) < len(want) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d records stored, want %d", len(got), len(want))
	}
	byKey := map[string]output.Message{}
	for _, m := range want {
		byKey[string(m.Key)] = m
	}
	last := map[string]int64{} // source partition → last offset seen
	for _, m := range got {
		w, ok := byKey[string(m.Key)]
		if !ok {
			t.Fatalf("stored a record with key %q that was not written", m.Key)
		}
		if !bytes.Equal(m.Value, w.Value) || fmt.Sprint(m.Headers) != fmt.Sprint(w.Headers) {
			t.Errorf("key %q: stored %s %v, wrote %s %v", m.Key, m.Value, m.Headers, w.Value, w.Headers)
		}
		delete(byKey, string(m.Key))
		sp := string(header(m, "source-partition"))
		var off int64
		fmt.Sscan(string(header(m, "source-offset")), &off)
		if prev, ok := last[sp]; ok && off <= prev {
			t.Errorf("source partition %s: offset %d stored after %d", sp, off, prev)
		}
		last[sp] = off
	}
}

func header(m output.Message, key string) []byte {
	for _, h := range m.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

func emptyWrite(t *testing.T, f Factory) {
	p, read := f(t)
	defer p.Close()
	if err := p.Write(context.Background(), nil); err != nil {
		t.Fatalf("empty write: %v", err)
	}
	if n := len(read()); n != 0 {
		t.Fatalf("%d records after an empty write", n)
	}
}

// endsWithContext: a write under an ended context returns an error at
// once.
func endsWithContext(t *testing.T, f Factory) {
	p, _ := f(t)
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := record(0, 1)
	done := make(chan error, 1)
	go func() { done <- p.Write(ctx, []output.Message{r.Encode()}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a write under an ended context reported success")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a write under an ended context did not return")
	}
}
