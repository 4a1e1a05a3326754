package ingest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Start positions for partitions no snapshot has seen.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// ConsumerConfig configures a Consumer. Zero values mean the default.
type ConsumerConfig struct {
	// Brokers is the bootstrap list. Required.
	Brokers []string
	// Topic to learn from. Required.
	Topic string
	// GroupID of the consumer group. Default: "streamkpca".
	GroupID string
	// Start is where a partition the model has never seen starts:
	// earliest or latest. Default: earliest.
	Start string
	// QueueSize and QueueBytes bound the messages fetched but not yet
	// taken by the learner, in count and in bytes of their values
	// (backpressure: fetching pauses when either is reached; a message
	// larger than QueueBytes alone still passes, on its own). Resident
	// memory for fetched messages stays below QueueBytes plus, per
	// assigned partition, the reader's buffer of readerQueue messages
	// and one fetch of MaxMessageBytes. Defaults: DefaultQueueSize and
	// DefaultQueueBytes.
	QueueSize  int
	QueueBytes int64
	// MaxMessageBytes is the largest fetch per partition (a larger
	// message still arrives, alone). Default: DefaultMaxMessageBytes.
	MaxMessageBytes int
	// FetchMaxWait bounds one fetch: kafka-go makes it the read deadline
	// of the fetch response and asks the broker to hold an idle fetch for
	// FetchMaxWait less 1 s (less a quarter of it when it is under 1 s:
	// kafka-go's adjustDeadlineForRTT with its defaultRTT). A broker (or network)
	// slower than that margin never answers in time, and the partition
	// stalls; a longer wait delays shutdown and rebalances by at most
	// FetchMaxWait (the reader's Close waits for its fetch). Default:
	// DefaultFetchMaxWait, whose margin (1 s) is the largest kafka-go gives.
	FetchMaxWait time.Duration
	// SessionTimeout and RebalanceTimeout of the group membership. A member
	// that dies without leaving (a crash) holds its partitions until the
	// session times out. Defaults: 10s each.
	SessionTimeout, RebalanceTimeout time.Duration
	// TLS, when non-nil, encrypts broker connections.
	TLS *tls.Config
	// SASL mechanism: "", "plain", "scram-sha-256" or "scram-sha-512".
	SASLMechanism, SASLUser, SASLPassword string
	// Logger; default zerolog.Nop().
	Logger *zerolog.Logger
	// OnAssign, when set, is called for every generation of the group
	// before its partitions are read, with a context that ends with the
	// generation: the reads start, from the OffsetFunc, once it returns
	// nil. An error ends the generation on this member (it joins the next).
	// A learner shared by the group (package cluster) agrees on its
	// offsets here.
	OnAssign func(ctx context.Context, a Assignment) error
	// OutOfRange is the rule for a partition whose next offset lies
	// outside the partition's range (OffsetGap): OutOfRangeEarliest
	// reads it again from its first offset, OutOfRangeFail ends Run with
	// an *OffsetGapError. Either way the gap is logged as an error and
	// passed to OnGap; nothing is skipped without a word. Default:
	// earliest.
	OutOfRange string
	// OnGap, when set, is called for every gap found (metrics).
	OnGap func(OffsetGap)
}

// Assignment is this member's part of one generation of the group.
type Assignment struct {
	// Generation is the group's generation id, Member this member's id.
	Generation int32
	Member     string
	// Partitions of the topic assigned to this member, ascending.
	Partitions []int
}

// Validate reports the first invalid field.
func (c *ConsumerConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("ingest: kafka.brokers is empty")
	}
	if c.Topic == "" {
		return errors.New("ingest: kafka.topic is empty")
	}
	switch c.Start {
	case "", StartEarliest, StartLatest:
	default:
		return fmt.Errorf("ingest: kafka.start %q (want earliest or latest)", c.Start)
	}
	switch c.OutOfRange {
	case "", OutOfRangeEarliest, OutOfRangeFail:
	default:
		return fmt.Errorf("ingest: kafka.offset_out_of_range %q (want earliest or fail)", c.OutOfRange)
	}
	if _, err := c.mechanism(); err != nil {
		return err
	}
	return nil
}

func (c *ConsumerConfig) mechanism() (sasl.Mechanism, error) {
	switch c.SASLMechanism {
	case "":
		return nil, nil
	case "plain":
		return plain.Mechanism{Username: c.SASLUser, Password: c.SASLPassword}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, c.SASLUser, c.SASLPassword)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, c.SASLUser, c.SASLPassword)
	}
	return nil, fmt.Errorf("ingest: kafka.sasl.mechanism %q (want plain, scram-sha-256 or scram-sha-512)", c.SASLMechanism)
}

// Dialer returns the kafka-go dialer for the config's TLS and SASL.
func (c *ConsumerConfig) Dialer() (*kafka.Dialer, error) {
	m, err := c.mechanism()
	if err != nil {
		return nil, err
	}
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: c.TLS, SASLMechanism: m}, nil
}

// Transport returns the kafka-go transport for writers.
func (c *ConsumerConfig) Transport() (*kafka.Transport, error) {
	m, err := c.mechanism()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{TLS: c.TLS, SASL: m, DialTimeout: 10 * time.Second}, nil
}

// Message is one fetched Kafka message.
type Message = kafka.Message

// OffsetFunc returns the next offset the model needs for a partition, and
// whether the model has seen it at all.
type OffsetFunc func(topic string, partition int) (int64, bool)

// Consumer reads a topic as a member of a consumer group. Every partition
// assigned to it is read from the offset the model needs (OffsetFunc), not
// from the group's committed offset: the snapshot is the truth, commits are
// a hint for tooling. Messages of all partitions arrive on one bounded
// channel.
type Consumer struct {
	cfg    ConsumerConfig
	log    zerolog.Logger
	dialer *kafka.Dialer
	queue  *byteQueue

	mu     sync.Mutex
	cg     *kafka.ConsumerGroup // replaced by Rebalance
	gen    *kafka.Generation
	lag    map[int]int64
	closed bool
	// aside, set by StepAside, is what the member waits for before it
	// joins the group again.
	aside func(context.Context) error
	// halt ends Run with its cause (a gap under OutOfRangeFail).
	halt context.CancelCauseFunc
	// down: when the brokers were first found unreachable (a failed join
	// or fetch) and why; zero once a join or a fetch succeeds again.
	downSince time.Time
	downErr   error
}

// Unreachable reports since when the brokers have been unreachable (a
// group join or a fetch failing, with nothing succeeding since) and the
// last error; a zero time while they answer.
func (c *Consumer) Unreachable() (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.downSince, c.downErr
}

// reachable records a join's or a fetch's outcome (see Unreachable).
// answeredJoin reports whether a failed join is a broker's answer (a
// Kafka protocol error: the member was evicted, a rebalance is under
// way), not a broker that could not be reached.
func answeredJoin(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke)
}

func (c *Consumer) reachable(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.downSince, c.downErr = time.Time{}, nil
	case c.downSince.IsZero():
		c.downSince, c.downErr = time.Now(), err
	default:
		c.downErr = err
	}
}

// NewConsumer joins the group. It does not fetch until Run.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.GroupID == "" {
		cfg.GroupID = DefaultGroupID
	}
	positive(&cfg.QueueSize, DefaultQueueSize)
	positive(&cfg.QueueBytes, DefaultQueueBytes)
	positive(&cfg.MaxMessageBytes, DefaultMaxMessageBytes)
	positive(&cfg.FetchMaxWait, DefaultFetchMaxWait)
	positive(&cfg.SessionTimeout, DefaultGroupTimeout)
	positive(&cfg.RebalanceTimeout, DefaultGroupTimeout)
	log := zerolog.Nop()
	if cfg.Logger != nil {
		log = *cfg.Logger
	}
	d, err := cfg.Dialer()
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, log: log, dialer: d, queue: newByteQueue(cfg.QueueSize, cfg.QueueBytes), lag: map[int]int64{}}
	if c.cg, err = c.newGroup(); err != nil {
		return nil, err
	}
	return c, nil
}

// newGroup joins the consumer group as a new member.
func (c *Consumer) newGroup() (*kafka.ConsumerGroup, error) {
	cfg, log := c.cfg, c.log
	start := kafka.FirstOffset
	if cfg.Start == StartLatest {
		start = kafka.LastOffset
	}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: cfg.GroupID, Brokers: cfg.Brokers, Topics: []string{cfg.Topic}, Dialer: c.dialer,
		StartOffset: start, HeartbeatInterval: min(time.Second, cfg.SessionTimeout/4), SessionTimeout: cfg.SessionTimeout,
		RebalanceTimeout: cfg.RebalanceTimeout, JoinGroupBackoff: min(time.Second, cfg.SessionTimeout/4),
		WatchPartitionChanges: true, PartitionWatchInterval: 5 * time.Second,
		// kafka-go retries on its own and reports each attempt; Run says
		// once per backoff what is unreachable, so these are details.
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) { log.Debug().Msgf("kafka group: "+f, a...) }),
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: join consumer group %q: %w", cfg.GroupID, err)
	}
	return cg, nil
}

// positive sets *v to def unless it is positive.
func positive[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// The consumer's defaults, which the service's configuration (configs)
// takes as its own: stated here once.
const (
	DefaultGroupID   = "streamkpca"
	DefaultQueueSize = 4096
	// DefaultMaxMessageBytes is the broker default message.max.bytes
	// (1 MiB): the largest message decoded and the size of one fetch.
	DefaultMaxMessageBytes = 1 << 20
	// DefaultGroupTimeout is the default session and rebalance timeout.
	DefaultGroupTimeout = 10 * time.Second
)

// DefaultFetchMaxWait is the default ConsumerConfig.FetchMaxWait: a
// broker answering a fetch within 1 s is read; an idle partition's fetch
// is held 0.5 s. (At the former 250 ms the margin was 62 ms, and a fetch
// answered slower than that never arrived.)
const DefaultFetchMaxWait = 1500 * time.Millisecond

// DefaultQueueBytes bounds the bytes of fetched messages waiting for the
// learner.
const DefaultQueueBytes = 64 << 20

// readerQueue is the per-partition reader's own buffer, in messages.
const readerQueue = 16

// maxBackoff caps the wait between attempts to join the group.
const maxBackoff = 30 * time.Second

// Fetch returns the fetched messages waiting, at most max, waiting for the
// first; their bytes leave the queue's bound.
func (c *Consumer) Fetch(ctx context.Context, max int) (Batch, error) {
	msgs, gen, rewound, err := c.queue.take(ctx, max)
	if err != nil {
		return Batch{}, err
	}
	b := newBatch(msgs)
	b.Generation, b.Rewound = gen, rewound
	return b, nil
}

// Lag returns the sum over partitions of the last known consumer lag.
func (c *Consumer) Lag() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s int64
	for _, l := range c.lag {
		s += l
	}
	return s + c.queue.len()
}

// PartitionLags returns the last known consumer lag of each partition
// this member owns (a copy).
func (c *Consumer) PartitionLags() map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.lag)
}

// keepLags forgets the lag of partitions no longer owned: after a
// rebalance another member reads them, and counting their last lag here
// too overstated the group's lag.
func (c *Consumer) keepLags(owned []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.lag, func(p int, _ int64) bool { return !slices.Contains(owned, p) })
}

// QueuedBytes returns the bytes of the fetched messages waiting for the
// learner, as counted against QueueBytes (a message larger than the bound
// counts as the bound): never more than QueueBytes.
func (c *Consumer) QueuedBytes() int64 { return c.queue.heldBytes() }

// Run fetches until ctx is done, following rebalances: for every
// generation it reads each assigned partition from next(topic, partition)
// or, for a partition the model has not seen, from the start position.
func (c *Consumer) Run(ctx context.Context, next OffsetFunc) error {
	ctx, halt := context.WithCancelCause(ctx)
	defer halt(nil)
	c.mu.Lock()
	c.halt = halt
	c.mu.Unlock()
	go c.checkTopic(ctx)
	backoff := time.Second
	for {
		c.mu.Lock()
		cg := c.cg
		c.mu.Unlock()
		gen, err := cg.Next(ctx)
		if err != nil {
			if gap := (*OffsetGapError)(nil); errors.As(context.Cause(ctx), &gap) {
				return gap
			}
			if err := c.joinFailed(ctx, cg, err, &backoff); err != nil {
				return err
			}
			continue
		}
		backoff = time.Second
		c.reachable(nil)
		c.mu.Lock()
		c.gen = gen
		c.mu.Unlock()
		c.startGeneration(gen, next)
	}
}

// joinFailed handles a failed join of the consumer group cg: nil when Run
// joins again (after the back-off, doubled up to maxBackoff, when the
// brokers refused or could not be reached; at once after a Rebalance;
// once StepAside's signal says so), the error that ends Run otherwise.
func (c *Consumer) joinFailed(ctx context.Context, cg *kafka.ConsumerGroup, err error, backoff *time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, kafka.ErrGroupClosed) {
		c.mu.Lock()
		rejoined := c.cg != cg && !c.closed
		aside := c.aside
		c.aside = nil
		closed := c.closed
		c.mu.Unlock()
		if rejoined { // Rebalance: the same consumer, a new member
			return nil
		}
		if aside != nil && !closed { // StepAside: out of the group until aside says
			return c.rejoinAfter(ctx, cg, aside)
		}
		return err
	}
	if answeredJoin(err) {
		// The coordinator answered (an evicted member after a
		// freeze, a rebalance under way): reachable, refused.
		c.reachable(nil)
		c.log.Warn().Err(err).Str("group", c.cfg.GroupID).Int64("retry_in_ms", backoff.Milliseconds()).
			Msg("kafka: the group coordinator refused this member's join (the brokers are reachable); joining again as a new member, learning is paused meanwhile")
	} else {
		c.reachable(err)
		c.log.Warn().Err(err).Strs("brokers", c.cfg.Brokers).Str("group", c.cfg.GroupID).Int64("retry_in_ms", backoff.Milliseconds()).
			Msg("kafka: cannot join the consumer group: the brokers do not answer (check kafka.brokers, and kafka.tls / kafka.sasl if the cluster wants them); learning is paused, the served model is unchanged, retrying")
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*backoff):
	}
	*backoff = min(2**backoff, maxBackoff)
	return nil
}

// startGeneration starts reading the partitions gen assigns, each from
// next or the start position; with OnAssign, after it has accepted the
// generation.
func (c *Consumer) startGeneration(gen *kafka.Generation, next OffsetFunc) {
	assigned := gen.Assignments[c.cfg.Topic]
	c.log.Info().Int32("generation", gen.ID).Int("partitions", len(assigned)).Msg("kafka: partitions assigned")
	owned := make([]int, 0, len(assigned))
	for _, pa := range assigned {
		owned = append(owned, pa.ID)
	}
	c.keepLags(owned)
	if c.cfg.OnAssign == nil {
		for _, pa := range assigned {
			partition := pa.ID
			gen.Start(func(gctx context.Context) { c.readPartition(gctx, gen.ID, partition, c.start(next, partition)) })
		}
		return
	}
	a := Assignment{Generation: gen.ID, Member: gen.MemberID}
	for _, pa := range assigned {
		a.Partitions = append(a.Partitions, pa.ID)
	}
	slices.Sort(a.Partitions)
	// One function for the generation: kafka-go ends a generation when
	// any of its functions returns.
	gen.Start(func(gctx context.Context) {
		if err := c.cfg.OnAssign(gctx, a); err != nil {
			if gctx.Err() == nil {
				c.log.Warn().Err(err).Int32("generation", gen.ID).Msg("kafka: the generation could not start; leaving it for the next")
			}
			return
		}
		var wg sync.WaitGroup
		for _, partition := range a.Partitions {
			start := c.start(next, partition)
			wg.Go(func() { c.readPartition(gctx, gen.ID, partition, start) })
		}
		wg.Wait()
	})
}

// start is where partition's reads begin: the model's next offset, or the
// start position for a partition the model has not seen (also when the
// group has a commit for it: the model is the truth).
func (c *Consumer) start(next OffsetFunc, partition int) int64 {
	if off, ok := next(c.cfg.Topic, partition); ok {
		return off
	}
	if c.cfg.Start == StartLatest {
		return kafka.LastOffset
	}
	return kafka.FirstOffset
}

// Partitions returns the number of partitions of the topic.
func (c *Consumer) Partitions(ctx context.Context) (int, error) {
	var err error
	for _, b := range c.cfg.Brokers {
		var ps []kafka.Partition
		if ps, err = c.dialer.LookupPartitions(ctx, "tcp", b, c.cfg.Topic); err == nil {
			return len(ps), nil
		}
	}
	return 0, fmt.Errorf("ingest: the partitions of %s: %w", c.cfg.Topic, err)
}

// checkTopic warns, once, when the topic does not exist: the group then
// waits for it without a word (kafka-go's consumer group neither creates
// the topic nor reports it missing), which looks like a stream with no
// messages.
func (c *Consumer) checkTopic(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Partitions(ctx)
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		c.log.Warn().Str("topic", c.cfg.Topic).Strs("brokers", c.cfg.Brokers).
			Msg("kafka: the topic does not exist; waiting for it to be created (check kafka.topic, or create it: the service does not)")
	}
}

// StepAside leaves the group at once (its partitions go to the other
// members at the rebalance this starts) and joins it again, as a new
// member, only once ready returns nil: what a cluster member does when it
// cannot reach the group's exchange, so that the others go on without
// it. ready runs on Run's goroutine with Run's context; it should poll
// and return when that context ends.
func (c *Consumer) StepAside(ready func(context.Context) error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.aside = ready
	cg := c.cg
	c.mu.Unlock()
	return cg.Close()
}

// rejoinAfter waits for ready (StepAside) and then joins the group again
// as a new member, unless the consumer was closed or rejoined meanwhile.
func (c *Consumer) rejoinAfter(ctx context.Context, old *kafka.ConsumerGroup, ready func(context.Context) error) error {
	c.log.Info().Str("group", c.cfg.GroupID).Msg("kafka: left the consumer group; joining again once this member can take part")
	if err := ready(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	cg, err := c.newGroup()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.cg != old {
		return cg.Close()
	}
	c.cg = cg
	return nil
}

// Rebalance leaves the group and joins it again as a new member, which
// starts a new generation for every member: what a member does when its
// generation can no longer work (a cluster step lost without a member
// leaving).
func (c *Consumer) Rebalance() error {
	cg, err := c.newGroup()
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return cg.Close()
	}
	old := c.cg
	c.cg = cg
	c.mu.Unlock()
	return old.Close()
}

// readPartition reads partition from start until ctx ends, checking
// start against the partition's range first and again whenever the reader
// finds its offset out of range (gaps.go).
func (c *Consumer) readPartition(ctx context.Context, gen int32, partition int, start int64) {
	rewind := false
	for ctx.Err() == nil {
		to, err := c.inRange(ctx, partition, start)
		if err != nil {
			c.mu.Lock()
			halt := c.halt
			c.mu.Unlock()
			if halt != nil {
				halt(err)
			}
			return
		}
		rewind = rewind || to < start
		start, rewind = c.readFrom(ctx, gen, partition, to, rewind)
	}
}

// readFrom reads partition from start until ctx ends or the reader finds
// its offset out of the partition's range: then it returns the offset
// after the last message it queued (start if none), and whether the
// rewind is still to be marked. With rewind, the first message queued
// carries the mark (Batch.Rewind): it is below the model's offset.
func (c *Consumer) readFrom(ctx context.Context, gen int32, partition int, start int64, rewind bool) (int64, bool) {
	rctx, out := context.WithCancelCause(ctx)
	defer out(nil)
	var at atomic.Int64 // where the reader found its offset out of range
	at.Store(math.MaxInt64)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: c.cfg.Brokers, Topic: c.cfg.Topic, Partition: partition, Dialer: c.dialer,
		MinBytes: 1, MaxBytes: c.cfg.MaxMessageBytes, MaxWait: c.cfg.FetchMaxWait, QueueCapacity: readerQueue,
		ReadBackoffMin: 100 * time.Millisecond, ReadBackoffMax: 2 * time.Second,
		// An offset out of range stops this reader for readPartition's
		// check: as an error where kafka-go returns one (its reader's
		// first fetch), else at its log line.
		OffsetOutOfRangeError: true,
		// Routine read timeouts and retries: details, not warnings.
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) {
			if off, ok := outOfRange(f, a); ok {
				at.Store(off)
				out(errOutOfRange)
			}
			c.log.Debug().Msgf("kafka reader: "+f, a...)
		}),
	})
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		c.log.Error().Err(err).Int("partition", partition).Msg("kafka: seek failed")
		<-ctx.Done()
		return start, rewind
	}
	c.log.Debug().Int("partition", partition).Int64("offset", start).Msg("kafka: reading partition")
	next := start
	for {
		m, err := r.FetchMessage(rctx)
		if err == nil && m.Offset >= at.Load() {
			// Fetched past the point kafka-go found out of range
			// (it skips ahead on its own): left for the check.
			err = errOutOfRange
		}
		if err != nil {
			if ctx.Err() == nil && (errors.Is(context.Cause(rctx), errOutOfRange) || errors.Is(err, errOutOfRange) || errors.Is(err, kafka.OffsetOutOfRange)) {
				return next, rewind
			}
			if ctx.Err() == nil {
				c.reachable(err)
				c.log.Warn().Err(err).Int("partition", partition).Msg("kafka: fetch failed; retrying")
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
					continue
				}
			}
			return next, rewind
		}
		c.mu.Lock()
		c.lag[partition] = r.Lag()
		c.downSince, c.downErr = time.Time{}, nil
		c.mu.Unlock()
		if c.queue.put(ctx, m, gen, rewind) != nil {
			return next, rewind
		}
		next, rewind = m.Offset+1, false
	}
}

// Commit commits offsets (topic → partition → next offset) to the group
// through the current generation. It is a hint for tooling; an error after
// a rebalance is expected and harmless.
// kafka-go's generation takes no context: a commit that outlives ctx is
// left to finish on its own and reported as ctx's error.
func (c *Consumer) Commit(ctx context.Context, offsets map[string]map[int]int64) error {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	if gen == nil {
		return errors.New("ingest: no group generation to commit through")
	}
	done := make(chan error, 1)
	go func() { done <- gen.CommitOffsets(offsets) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("ingest: commit: %w", ctx.Err())
	}
}

// Close leaves the group.
func (c *Consumer) Close() error {
	c.mu.Lock()
	c.closed = true
	cg := c.cg
	c.mu.Unlock()
	return cg.Close()
}
