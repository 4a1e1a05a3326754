package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrMemberGone is returned (wrapped in a *GoneError) by
// Exchange.AllGather when a member's payload did not arrive within the
// round's timeout.
var ErrMemberGone = errors.New("transport: a cluster member did not answer within the step timeout")

// GoneError names the members whose payloads of a round did not arrive.
type GoneError struct {
	Round   uint64
	Missing []string
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("transport: round %d: no payload from %v within the step timeout", e.Round, e.Missing)
}

func (e *GoneError) Unwrap() error { return ErrMemberGone }

// Exchange defaults.
const (
	// DefaultStepTimeout bounds one round of an Exchange.
	DefaultStepTimeout = 30 * time.Second
	// DefaultExchangePending bounds the bytes an Exchange's subscription
	// buffers (the rounds in flight: two at most).
	DefaultExchangePending = 1 << 30
	// exchangeHeader is the size of a chunk's header: magic, round, total
	// length, sender, part and parts.
	exchangeHeader = 32
	// maxExchangePayload bounds one member's payload of one round.
	maxExchangePayload = 1 << 30
	// resendEvery is how often the first round's payload is sent again.
	resendEvery = 100 * time.Millisecond
)

// exchangeMagic starts every chunk of an Exchange ("SKX1").
var exchangeMagic = [4]byte{'S', 'K', 'X', '1'}

// ExchangeConfig configures an Exchange. Zero values mean the default.
type ExchangeConfig struct {
	// Prefix and Model name the subjects, <prefix>.<model>.cluster.<generation>.<rank>.
	// Prefix default: "streamkpca"; Model required.
	Prefix, Model string
	// Generation is the consumer group's generation: one Exchange per
	// generation, so a round of an old generation never mixes with a new
	// one. Must be ≥ 0.
	Generation int64
	// Members are the generation's member ids, in any order (the Exchange
	// orders them); Self must be one of them.
	Members []string
	Self    string
	// Timeout bounds one round: a member whose payload has not arrived by
	// then is gone. Default: DefaultStepTimeout.
	Timeout time.Duration
	// ChunkBytes is the largest message, header included. Default: the
	// server's max payload less 1 KiB.
	ChunkBytes int
	// PendingBytes bounds the received chunks waiting to be read (as
	// PendingBytes/ChunkBytes chunks); past it the client drops chunks and
	// the round times out. Default: DefaultExchangePending.
	PendingBytes int
}

// Exchange is the rounds of the members of one generation over core NATS
// (package cluster's Gatherer): in an all-gather every member publishes
// one payload, split into chunks below the server's message limit, and
// receives every member's, ordered by member id; in an all-to-all every
// member sends one part to each other member on that member's own
// subject. It is the transport of the data-parallel steps.
//
// Core NATS delivers at most once: a message lost (a member gone, a
// connection cut, a subscription past PendingBytes) makes the round time
// out with a *GoneError on the members that missed it; cluster's protocol
// recovers from that in the next generation. An Exchange is not safe for
// concurrent use.
type Exchange struct {
	nc       *nats.Conn
	subj     string
	members  []string
	self     int
	timeout  time.Duration
	chunk    int
	subs     []*nats.Subscription // the other members' subjects
	in       chan *nats.Msg
	closed   bool
	rounds   map[uint64]*gathering
	last     uint64 // the last round gathered + 1
	dropped  int    // messages that were not a current round's
	hdr      [exchangeHeader]byte
	outChunk []byte
	// first is the first round's payload, sent again while the first two
	// rounds are gathered (see AllGather).
	first      []byte
	firstRound uint64
}

// gathering is one round's payloads as they arrive.
type gathering struct {
	parts   [][][]byte // per member: its chunks
	have    []int      // per member: chunks received
	total   []uint64   // per member: announced length
	payload [][]byte   // per member: assembled, once complete
	missing int        // members not yet complete
}

// NewExchange subscribes to the generation's subject. Close it when the
// generation ends.
func NewExchange(nc *nats.Conn, cfg ExchangeConfig) (*Exchange, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "streamkpca"
	}
	if !nameRE.MatchString(cfg.Model) {
		return nil, fmt.Errorf("transport: exchange: model name %q must be letters, digits, '-' or '_'", cfg.Model)
	}
	if cfg.Generation < 0 {
		return nil, fmt.Errorf("transport: exchange: generation %d is negative", cfg.Generation)
	}
	members := slices.Clone(cfg.Members)
	slices.Sort(members)
	if len(slices.Compact(slices.Clone(members))) != len(members) {
		return nil, fmt.Errorf("transport: exchange: member ids %v repeat", cfg.Members)
	}
	self := slices.Index(members, cfg.Self)
	if self < 0 {
		return nil, fmt.Errorf("transport: exchange: self %q is not among the members %v", cfg.Self, members)
	}
	if cfg.Timeout < 0 || cfg.ChunkBytes < 0 || cfg.PendingBytes < 0 {
		return nil, fmt.Errorf("transport: exchange: timeout %v, chunk bytes %d and pending bytes %d must not be negative", cfg.Timeout, cfg.ChunkBytes, cfg.PendingBytes)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultStepTimeout
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = int(nc.MaxPayload()) - 1024
	}
	if cfg.ChunkBytes <= exchangeHeader || int64(cfg.ChunkBytes) > nc.MaxPayload() {
		return nil, fmt.Errorf("transport: exchange: chunk bytes %d must be above %d and at most the server's max payload %d", cfg.ChunkBytes, exchangeHeader, nc.MaxPayload())
	}
	if cfg.PendingBytes == 0 {
		cfg.PendingBytes = DefaultExchangePending
	}
	e := &Exchange{
		nc:      nc,
		subj:    cfg.Prefix + "." + cfg.Model + ".cluster." + strconv.FormatInt(cfg.Generation, 10),
		members: members,
		self:    self,
		timeout: cfg.Timeout,
		chunk:   cfg.ChunkBytes - exchangeHeader,
		rounds:  map[uint64]*gathering{},
	}
	// One subject per member, so that the server does not echo a
	// member's chunks back to it: it subscribes to the others' only, all
	// into one channel, which holds PendingBytes of chunks.
	e.in = make(chan *nats.Msg, max(64, cfg.PendingBytes/cfg.ChunkBytes))
	for r := range members {
		if r == self {
			continue
		}
		sub, err := nc.ChanSubscribe(e.subject(r), e.in)
		if err != nil {
			_ = e.Close()
			return nil, fmt.Errorf("transport: exchange: subscribe to %s: %w", e.subject(r), err)
		}
		e.subs = append(e.subs, sub)
	}
	// The parts addressed to this member (AllToAll), from every other.
	sub, err := nc.ChanSubscribe(e.direct(-1, self), e.in)
	if err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("transport: exchange: subscribe to %s: %w", e.direct(-1, self), err)
	}
	e.subs = append(e.subs, sub)
	// The subscriptions must be known to the server before any member
	// publishes the first round, or that round's early chunks are lost.
	if err := nc.Flush(); err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("transport: exchange: flush the subscriptions to %s.*: %w", e.subj, err)
	}
	return e, nil
}

// subject is member rank's subject: <prefix>.<model>.cluster.<generation>.<rank>.
func (e *Exchange) subject(rank int) string { return e.subj + "." + strconv.Itoa(rank) }

// direct is the subject of from's parts for member to (AllToAll):
// <prefix>.<model>.cluster.<generation>.<from>.<to>; from −1 is the
// wildcard of every sender.
func (e *Exchange) direct(from, to int) string {
	f := "*"
	if from >= 0 {
		f = strconv.Itoa(from)
	}
	return e.subj + "." + f + "." + strconv.Itoa(to)
}

// Size is the number of members.
func (e *Exchange) Size() int { return len(e.members) }

// Rank is this member's index in member-id order.
func (e *Exchange) Rank() int { return e.self }

// Members returns the member ids in rank order.
func (e *Exchange) Members() []string { return slices.Clone(e.members) }

// Subject is the generation's subject prefix: member r sends on
// Subject().<r>.
func (e *Exchange) Subject() string { return e.subj }

// Dropped counts messages received that belonged to no round in flight
// (duplicates, stale rounds, malformed chunks).
func (e *Exchange) Dropped() int { return e.dropped }

// Close unsubscribes.
func (e *Exchange) Close() error {
	var errs []error
	for _, sub := range e.subs {
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, err)
		}
	}
	e.subs, e.closed = nil, true
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("transport: exchange: %w", err)
	}
	return nil
}

// AllGather publishes payload as this member's contribution to round and
// returns every member's, in rank order (this member's is payload
// itself). Rounds must increase from one call to the next.
//
// Members create their Exchanges at different moments, and core NATS
// keeps nothing for a subscriber that comes later: the first round's
// payload is sent again every 100 ms until this member has gathered the
// second round (by then every member has subscribed and has the first).
// Keep the first round's payload small (package cluster sends each
// member's status). It returns a
// *GoneError (errors.Is ErrMemberGone) when some member's payload has not
// arrived within the timeout, and ctx's error when ctx ends first. The
// returned slices are not reused by the Exchange.
func (e *Exchange) AllGather(ctx context.Context, round uint64, payload []byte) ([][]byte, error) {
	if err := e.check(round, payload); err != nil {
		return nil, err
	}
	if len(e.members) == 1 { // nobody to send to
		return e.collect(ctx, round, payload)
	}
	if err := e.send(ctx, round, e.subject(e.self), payload); err != nil {
		return nil, err
	}
	if e.first == nil {
		e.firstRound, e.first = round, slices.Clone(payload)
		if e.first == nil {
			e.first = []byte{}
		}
	}
	return e.collect(ctx, round, payload)
}

// AllToAll sends parts[j] to member j (on Subject().<self>.<j>) and
// returns, in rank order, the part every member sent to this one (its
// own is parts[Rank()]). Errors as AllGather's; it is never a first
// round (nothing is sent again).
func (e *Exchange) AllToAll(ctx context.Context, round uint64, parts [][]byte) ([][]byte, error) {
	if len(parts) != len(e.members) {
		return nil, fmt.Errorf("transport: exchange: round %d: %d parts for %d members", round, len(parts), len(e.members))
	}
	for j, p := range parts {
		if err := e.check(round, p); err != nil {
			return nil, err
		}
		if j == e.self {
			continue
		}
		if err := e.send(ctx, round, e.direct(e.self, j), p); err != nil {
			return nil, err
		}
	}
	return e.collect(ctx, round, parts[e.self])
}

// check refuses a round that cannot be sent.
func (e *Exchange) check(round uint64, payload []byte) error {
	switch {
	case e.closed:
		return fmt.Errorf("transport: exchange: a round after Close")
	case round < e.last:
		return fmt.Errorf("transport: exchange: round %d after round %d", round, e.last-1)
	case len(payload) > maxExchangePayload:
		return fmt.Errorf("transport: exchange: a payload of %d bytes (at most %d)", len(payload), maxExchangePayload)
	}
	return nil
}

// collect waits for the other members' payloads of round (own is this
// member's) until the timeout or ctx ends.
func (e *Exchange) collect(ctx context.Context, round uint64, own []byte) ([][]byte, error) {
	g := e.round(round)
	if own == nil {
		own = []byte{} // nil marks a payload not yet complete
	}
	g.payload[e.self] = own
	g.missing--
	deadline := time.Now().Add(e.timeout)
	tick := time.NewTimer(resendEvery)
	defer tick.Stop()
	for g.missing > 0 {
		tick.Reset(max(min(resendEvery, time.Until(deadline)), time.Millisecond))
		select {
		case msg := <-e.in:
			e.receive(msg, round)
			continue
		case <-ctx.Done():
		case <-tick.C:
		}
		switch {
		case ctx.Err() != nil:
			e.forget(round)
			return nil, fmt.Errorf("transport: exchange: round %d: %w", round, ctx.Err())
		case !time.Now().Before(deadline):
			var missing []string
			for i, p := range g.payload {
				if p == nil {
					missing = append(missing, e.members[i])
				}
			}
			e.forget(round)
			e.last = round + 1
			return nil, &GoneError{Round: round, Missing: missing}
		case round <= e.firstRound+1:
			// A member may have subscribed after the first round went
			// out: until the second completes here (then every member
			// has the first), the first goes out again.
			if err := e.send(ctx, e.firstRound, e.subject(e.self), e.first); err != nil {
				return nil, err
			}
		}
	}
	out := g.payload
	e.forget(round)
	e.last = round + 1
	return out, nil
}

// send publishes payload's chunks for round on subject.
func (e *Exchange) send(ctx context.Context, round uint64, subject string, payload []byte) error {
	parts := max(1, (len(payload)+e.chunk-1)/e.chunk)
	h := e.hdr[:]
	copy(h, exchangeMagic[:])
	for p := range parts {
		putHeader(h, round, uint64(len(payload)), uint32(e.self), uint32(p), uint32(parts))
		body := payload[p*e.chunk : min(len(payload), (p+1)*e.chunk)]
		e.outChunk = append(append(e.outChunk[:0], h...), body...)
		if err := e.publish(ctx, subject, e.outChunk); err != nil {
			return fmt.Errorf("transport: exchange: round %d: publish part %d of %d: %w", round, p+1, parts, err)
		}
	}
	return nil
}

// publish sends one chunk. The service's connection keeps no reconnect
// buffer (a write queued while disconnected could reach the server after
// the model's lease moved on), so a chunk sent while reconnecting waits
// for the connection, within ctx, and goes out then: a round is numbered
// and a stale one is dropped by its readers, so a late chunk is harmless.
func (e *Exchange) publish(ctx context.Context, subject string, data []byte) error {
	for {
		err := e.nc.Publish(subject, data)
		if !errors.Is(err, nats.ErrReconnectBufExceeded) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (NATS reconnecting)", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// putHeader writes a chunk's header after the magic: round, the
// payload's length, the sender's rank, the part and the number of parts.
func putHeader(h []byte, round, total uint64, from, part, parts uint32) {
	binary.LittleEndian.PutUint64(h[4:], round)
	binary.LittleEndian.PutUint64(h[12:], total)
	binary.LittleEndian.PutUint32(h[20:], from)
	binary.LittleEndian.PutUint32(h[24:], part)
	binary.LittleEndian.PutUint32(h[28:], parts)
}

// round returns the gathering of round r, started if new.
func (e *Exchange) round(r uint64) *gathering {
	g := e.rounds[r]
	if g == nil {
		n := len(e.members)
		g = &gathering{parts: make([][][]byte, n), have: make([]int, n), total: make([]uint64, n), payload: make([][]byte, n), missing: n}
		e.rounds[r] = g
	}
	return g
}

func (e *Exchange) forget(r uint64) { delete(e.rounds, r) }

// receive files one chunk. Chunks of rounds before cur are stale; a round
// more than one ahead cannot come from a member of this generation
// (every member's round r+1 waits for this member's round r).
func (e *Exchange) receive(msg *nats.Msg, cur uint64) {
	data := msg.Data
	if len(data) < exchangeHeader || [4]byte(data[:4]) != exchangeMagic {
		e.dropped++
		return
	}
	r := binary.LittleEndian.Uint64(data[4:])
	total := binary.LittleEndian.Uint64(data[12:])
	from := int(binary.LittleEndian.Uint32(data[20:]))
	part := int(binary.LittleEndian.Uint32(data[24:]))
	parts := int(binary.LittleEndian.Uint32(data[28:]))
	body := data[exchangeHeader:]
	switch {
	case r < cur || r > cur+1, from >= len(e.members), from == e.self, msg.Subject != e.subject(from) && msg.Subject != e.direct(from, e.self),
		total > maxExchangePayload, parts < 1, part >= parts,
		parts != max(1, int((total+uint64(e.chunk)-1)/uint64(e.chunk))), // not chunked as every member chunks
		uint64(len(body)) > total:
		e.dropped++
		return
	}
	g := e.round(r)
	if g.payload[from] != nil {
		e.dropped++ // a duplicate of a complete payload
		return
	}
	if g.parts[from] != nil && (len(g.parts[from]) != parts || g.total[from] != total) {
		// Chunks that disagree on the payload's shape cannot both be the
		// member's: the newest wins, the others are dropped.
		e.dropped += g.have[from]
		g.parts[from] = nil
	}
	if g.parts[from] == nil {
		g.parts[from], g.have[from], g.total[from] = make([][]byte, parts), 0, total
	}
	if g.parts[from][part] != nil {
		e.dropped++
		return
	}
	g.parts[from][part] = body // nats.go hands each message its own buffer
	g.have[from]++
	if g.have[from] < parts {
		return
	}
	var n uint64
	for _, c := range g.parts[from] {
		n += uint64(len(c))
	}
	if n != total {
		// Inconsistent chunks: wait for the timeout rather than use them.
		e.dropped++
		g.parts[from], g.have[from] = nil, 0
		return
	}
	p := make([]byte, 0, total)
	for _, c := range g.parts[from] {
		p = append(p, c...)
	}
	g.payload[from], g.parts[from] = p, nil
	g.missing--
}
