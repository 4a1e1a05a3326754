package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestSecondSignalEndsAtOnce: `streamkpca run` whose graceful stop is
// long (a dead-letter topic whose broker never answers and no room in the
// spill: the final snapshot waits for the dead letter up to
// shutdown_timeout, here 2 minutes) ends at once on a second SIGTERM,
// killed by it, as an operator expects of a second Ctrl-C. Before,
// signal.NotifyContext kept relaying signals after the first, so the
// second was swallowed and the stop went on to its deadline.
func TestSecondSignalEndsAtOnce(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"sig": 1, "sig.dlq": 1})
	produceHermite(t, s, "sig", 2000, 1)
	tr := &kafka.Transport{}
	w := &kafka.Writer{Addr: kafka.TCP(s.Brokers()...), Topic: "sig", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, Transport: tr}
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("not a vector")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	tr.CloseIdleConnections()
	// The dead-letter topic refuses every write, and the spill has no
	// room: the graceful stop's final snapshot waits for the dead letter.
	refuseProduce(s, "sig.dlq", func() bool { return true }, nil)
	bin := buildBinary(t)
	dir := t.TempDir()
	c := startChild(t, bin, dir, func(port int) string {
		return fmt.Sprintf(`model: sig
kafka: {brokers: [%q], topic: sig, group: sig, dead_letter_spill_bytes: 1}
learner: {k: 3, bandwidth: 1, max_features: 2048, batch: 100}
snapshot: {dir: %q, every_batches: 2}
nats: {disabled: true}
shutdown_timeout: 2m
http: {addr: "127.0.0.1:%d"}
log: {level: warn, format: json}
`, s.Brokers()[0], filepath.Join(dir, "snapshots"), port)
	}, os.Stderr)
	waitFor(t, time.Minute, "the child learning, its dead letter refused", func() bool {
		return scrape(c.port, "streamkpca_samples_learned_total") > 0 && scrape(c.port, "streamkpca_dead_letter_errors_total") > 0
	})
	c.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(500 * time.Millisecond) // the graceful stop is under way
	c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			t.Errorf("after a second SIGTERM the child exited with %v; want it ended by the signal", err)
		}
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		<-done
		t.Fatal("a second SIGTERM did not end the child within 20 s (its graceful stop runs to shutdown_timeout, 2 minutes)")
	}
}
