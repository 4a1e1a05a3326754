package testkit

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer accepts connections on a loopback port and echoes each
// line back; it stops with the test.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through conn and reads it back, within limit;
// it returns the time taken and whether the line came back.
func roundTrip(conn net.Conn, r *bufio.Reader, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	conn.SetDeadline(start.Add(limit))
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		return time.Since(start), false
	}
	line, err := r.ReadString('\n')
	return time.Since(start), err == nil && line == "ping\n"
}

// The fault harness does what the fault tests rely on: a proxy passes
// bytes through, Degrade delays them by its latency each way, Partition
// passes none on an open connection without closing it, and its heal
// delivers what was held and lets the same connection carry bytes again. A harness that silently
// did nothing would make every fault test pass vacuously.
func TestFaultNetDoesWhatItSays(t *testing.T) {
	fn := NewFaultNet()
	p := fn.Proxy(t, echoServer(t))
	conn, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if _, ok := roundTrip(conn, r, 5*time.Second); !ok {
		t.Fatal("no echo through the proxy")
	}
	heal := Partition(t, p)
	if d, ok := roundTrip(conn, r, 500*time.Millisecond); ok {
		t.Fatalf("an echo across the partition after %v", d)
	}
	heal()
	// The line sent across the partition was held, not dropped: it comes
	// back after the heal, on the same connection.
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after the heal: %q, %v; want the line held across the partition", line, err)
	}
	if _, ok := roundTrip(conn, r, 5*time.Second); !ok {
		t.Fatal("the connection does not carry bytes after the heal")
	}
	Degrade(t, p, 150, 0, 1000)
	if d, ok := roundTrip(conn, r, 5*time.Second); !ok || d < 300*time.Millisecond {
		t.Errorf("round trip %v (ok %v) with 150 ms each way, want ≥ 300 ms", d, ok)
	}
	RemoveToxic(t, p, "latency")
	RemoveToxic(t, p, "bandwidth")
	if d, ok := roundTrip(conn, r, 5*time.Second); !ok || d > 250*time.Millisecond {
		t.Errorf("round trip %v (ok %v) with the toxics removed", d, ok)
	}
}
