// Package devstack runs an embedded Kafka (kfake, the real wire protocol)
// and an embedded NATS server with JetStream, for `streamkpca demo` and
// for tests. Both listen on 127.0.0.1 only.
package devstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamkpca/streamkpca/internal/synth"
)

// Options configure a Stack. Zero values mean the default.
type Options struct {
	// Dir holds Kafka's and JetStream's data; "" = a new temp directory
	// removed on Close.
	Dir string
	// KafkaPort and NATSPort: 0 = a free port.
	KafkaPort, NATSPort int
	// Topics to create with their partition counts.
	Topics map[string]int32
	// NATSOptions, if set, adjusts the server options (auth, TLS) before start.
	NATSOptions func(*server.Options)
	// KafkaOptions are extra kfake options (SASL users, TLS).
	KafkaOptions []kfake.Opt
	// KafkaBrokers is how many brokers the Kafka cluster has (partition
	// leaders spread over them; see kfake's MoveTopicPartition,
	// ShufflePartitionLeaders and RemoveNode for faults). Default: 1.
	KafkaBrokers int
}

// Stack is a running embedded Kafka + NATS.
type Stack struct {
	Kafka  *kfake.Cluster
	NATS   *server.Server
	opt    Options
	dir    string
	ownDir bool
	kports []int // one per broker, fixed at the first start
}

// Start starts both brokers.
func Start(opt Options) (*Stack, error) {
	s := &Stack{opt: opt, dir: opt.Dir}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "streamkpca-devstack-")
		if err != nil {
			return nil, err
		}
		s.dir, s.ownDir = d, true
	}
	if opt.KafkaPort != 0 {
		s.kports = []int{opt.KafkaPort}
	}
	if err := s.StartKafka(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.StartNATS(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// StartNATSOnly starts an embedded NATS server with JetStream alone, its
// store under dir (a test's temporary directory, say), opt (if not nil)
// applied to its options; Close stops it.
func StartNATSOnly(dir string, opt func(*server.Options)) (*Stack, error) {
	s := &Stack{opt: Options{Dir: dir, NATSOptions: opt}, dir: dir}
	if err := s.StartNATS(); err != nil {
		return nil, err
	}
	return s, nil
}

// StartKafka (re)starts the Kafka cluster on the same port and data dir.
func (s *Stack) StartKafka() error {
	n := max(1, s.opt.KafkaBrokers)
	opts := []kfake.Opt{kfake.NumBrokers(n), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond), // tests restart crashed members quickly
		kfake.DataDir(filepath.Join(s.dir, "kafka"))}
	if len(s.kports) == n {
		opts = append(opts, kfake.Ports(s.kports...))
	}
	for t, n := range s.opt.Topics {
		opts = append(opts, kfake.SeedTopics(n, t))
	}
	opts = append(opts, s.opt.KafkaOptions...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("devstack: start kafka: %w", err)
	}
	s.Kafka = c
	if len(s.kports) != n {
		s.kports = s.kports[:0]
		for _, a := range c.ListenAddrs() {
			_, p, _ := strings.Cut(a, ":")
			port, _ := strconv.Atoi(p)
			s.kports = append(s.kports, port)
		}
	}
	return nil
}

// StopKafka closes the Kafka cluster (its data stays in the data dir).
func (s *Stack) StopKafka() {
	if s.Kafka != nil {
		s.Kafka.Close()
		s.Kafka = nil
	}
}

// StartNATS (re)starts NATS on the same port and JetStream store.
func (s *Stack) StartNATS() error {
	port := s.opt.NATSPort
	if port == 0 {
		port = -1
	}
	o := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true, JetStream: true,
		StoreDir: filepath.Join(s.dir, "jetstream"), ServerName: "streamkpca-devstack"}
	if s.opt.NATSOptions != nil {
		s.opt.NATSOptions(o)
	}
	ns, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("devstack: nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return errors.New("devstack: nats not ready after 10s")
	}
	if s.opt.NATSPort == 0 {
		// Keep the port so that a restart comes back at the same address.
		if a, ok := ns.Addr().(*net.TCPAddr); ok {
			s.opt.NATSPort = a.Port
		}
	}
	s.NATS = ns
	return nil
}

// StopNATS shuts NATS down (its JetStream store stays in the data dir).
func (s *Stack) StopNATS() {
	if s.NATS != nil {
		s.NATS.Shutdown()
		s.NATS.WaitForShutdown()
		s.NATS = nil
	}
}

// Brokers is the Kafka bootstrap list: every broker.
func (s *Stack) Brokers() []string {
	out := make([]string, len(s.kports))
	for i, p := range s.kports {
		out[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return out
}

// NATSURL is the NATS client URL.
func (s *Stack) NATSURL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.opt.NATSPort) }

// Dir is the data directory.
func (s *Stack) Dir() string { return s.dir }

// Close stops both and removes a temp data dir.
func (s *Stack) Close() {
	s.StopKafka()
	s.StopNATS()
	if s.ownDir {
		os.RemoveAll(s.dir)
	}
}

// Messages returns how many messages the topic holds (the sum of its
// partitions' end offsets; nothing is ever deleted from the embedded
// cluster), for a demo resuming from its data directory.
func (s *Stack) Messages(ctx context.Context, topic string) (int64, error) {
	var total int64
	for p := 0; p < int(s.opt.Topics[topic]); p++ {
		c, err := kafka.DialLeader(ctx, "tcp", s.Brokers()[0], topic, p)
		if err != nil {
			return 0, fmt.Errorf("devstack: %s partition %d: %w", topic, p, err)
		}
		n, err := c.ReadLastOffset()
		c.Close()
		if err != nil {
			return 0, fmt.Errorf("devstack: %s partition %d: end offset: %w", topic, p, err)
		}
		total += n
	}
	return total, nil
}

// ReadPartition calls each with every message of a topic's partition,
// from its first offset to its end when called, in order, reading in
// fetches of up to 8 MiB.
func (s *Stack) ReadPartition(ctx context.Context, topic string, partition int, each func(kafka.Message)) error {
	c, err := kafka.DialLeader(ctx, "tcp", s.Brokers()[0], topic, partition)
	if err != nil {
		return fmt.Errorf("devstack: %s partition %d: %w", topic, partition, err)
	}
	defer c.Close()
	last, err := c.ReadLastOffset()
	if err != nil {
		return fmt.Errorf("devstack: %s partition %d: end offset: %w", topic, partition, err)
	}
	if _, err := c.Seek(0, kafka.SeekAbsolute); err != nil {
		return fmt.Errorf("devstack: %s partition %d: %w", topic, partition, err)
	}
	for off := int64(0); off < last; {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b := c.ReadBatch(1, 8<<20)
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			off = m.Offset + 1
			each(m)
		}
		if err := b.Close(); err != nil && !errors.Is(err, kafka.RequestTimedOut) {
			return fmt.Errorf("devstack: %s partition %d at offset %d: %w", topic, partition, off, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Source yields message payloads.
type Source func(i int) []byte

// HermiteJSON returns a source of JSON vectors from a hermite stream with a
// seeded generator (deterministic: message i is the same on every run).
func HermiteJSON(h synth.Hermite, seed uint64) Source {
	rng := rand.New(rand.NewPCG(seed, 3))
	x := make([]float64, h.Dim())
	return func(int) []byte {
		h.Sample(x, rng)
		b := make([]byte, 0, 24*len(x))
		b = append(b, '[')
		for j, v := range x {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		return append(b, ']')
	}
}

// ProduceOptions configure Produce.
type ProduceOptions struct {
	Brokers []string
	Topic   string
	// N messages (negative: until ctx ends); Rate per second (0 = as
	// fast as possible).
	N    int
	Rate float64
	// Chunk is the most messages a write holds (0: a second of Rate, at
	// most 1,000). A slow producer with Chunk set to the learner's batch
	// sends whole batches in bursts.
	Chunk int
	// Progress, if set, is called with the count after each flush.
	Progress func(n int)
	// Transport for TLS/SASL; nil = plain.
	Transport *kafka.Transport
}

// Produce writes N messages of src into the topic, spread over its
// partitions round-robin, with acks from all replicas. With N negative
// it writes until ctx ends and then returns nil.
func Produce(ctx context.Context, src Source, o ProduceOptions) error {
	w := &kafka.Writer{Addr: kafka.TCP(o.Brokers...), Topic: o.Topic, Balancer: &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: true, BatchSize: 1000, BatchTimeout: 5 * time.Millisecond}
	if o.Transport != nil {
		w.Transport = o.Transport
	} else {
		// Its own transport, closed at the end: kafka-go's shared default
		// would keep a metadata goroutine per cluster for the process's
		// life.
		tr := &kafka.Transport{}
		w.Transport = tr
		defer tr.CloseIdleConnections()
	}
	defer w.Close()
	// A write holds at most a second of the rate: a slow producer sends
	// every second, not in bursts of a thousand.
	chunk := 1000
	if o.Chunk > 0 {
		chunk = o.Chunk
	} else if o.Rate > 0 {
		chunk = max(1, min(chunk, int(o.Rate)))
	}
	n, forever := o.N, o.N < 0
	start := time.Now()
	msgs := make([]kafka.Message, 0, chunk)
	for i := 0; forever || i < n; {
		msgs = msgs[:0]
		for ; len(msgs) < chunk && (forever || i < n); i++ {
			msgs = append(msgs, kafka.Message{Value: src(i)})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			if forever && ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("devstack: produce to %s: %w", o.Topic, err)
		}
		if o.Progress != nil {
			o.Progress(i)
		}
		if o.Rate > 0 {
			ahead := time.Duration(float64(i)/o.Rate*float64(time.Second)) - time.Since(start)
			if ahead > 0 {
				select {
				case <-ctx.Done():
					if forever {
						return nil
					}
					return ctx.Err()
				case <-time.After(ahead):
				}
			}
		}
	}
	return nil
}

// Lines reads the non-blank lines of a file (csv or JSON lines), one
// message each, for `streamkpca produce --source FILE`.
func Lines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
	}
	return lines, sc.Err()
}
