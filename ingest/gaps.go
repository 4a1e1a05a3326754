package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// Rules for a partition whose next offset lies outside its range
// (ConsumerConfig.OutOfRange, kafka.offset_out_of_range).
const (
	OutOfRangeEarliest = "earliest"
	OutOfRangeFail     = "fail"
)

// Kinds of OffsetGap.
const (
	// GapPastEnd: the model's next offset is beyond the partition's
	// end. The topic was deleted and created again, or truncated: the
	// messages now in the partition are new to the model.
	GapPastEnd = "past_end"
	// GapDeleted: the model's next offset is below the partition's first
	// offset. Retention (or a records deletion) removed messages the
	// model had not read: they are lost.
	GapDeleted = "deleted"
)

// OffsetGap is a partition whose next offset lies outside its range
// [First, End) (End is the offset the next message produced gets).
type OffsetGap struct {
	Kind      string
	Topic     string
	Partition int
	// Next is the offset the model needed; First and End the partition's
	// range when it was found.
	Next, First, End int64
	// Lost is the number of messages removed before the model read them
	// (GapDeleted); 0 for GapPastEnd.
	Lost int64
}

func (g OffsetGap) String() string {
	if g.Kind == GapDeleted {
		return fmt.Sprintf("partition %d of %s: the model's next offset %d is below the partition's first %d: %d messages were deleted (retention?) before the model read them",
			g.Partition, g.Topic, g.Next, g.First, g.Lost)
	}
	return fmt.Sprintf("partition %d of %s: the model's next offset %d is past the partition's end %d (first %d): the topic was deleted and created again, or truncated",
		g.Partition, g.Topic, g.Next, g.End, g.First)
}

// OffsetGapError ends Run under OutOfRangeFail.
type OffsetGapError struct{ Gap OffsetGap }

func (e *OffsetGapError) Error() string {
	return "ingest: " + e.Gap.String() + " (kafka.offset_out_of_range is fail: set it to earliest to read the partition from its first offset, or point the service at a new snapshot.dir)"
}

// errOutOfRange stops a partition's reader for the range check.
var errOutOfRange = errors.New("ingest: offset out of the partition's range")

// outOfRange reports whether a kafka-go reader's error log line (f with
// its arguments a) says that its offset is out of the partition's range,
// and at which offset. kafka-go handles the case on its own: before the
// first offset it skips ahead, past the end it waits; the service checks
// instead (readPartition). The lines' words are kafka-go's
// (reader.go, v0.4.51; TestOutOfRangeLogLines pins them).
func outOfRange(f string, a []any) (int64, bool) {
	if !strings.Contains(f, "before the first offset") && !strings.Contains(f, "passed the last offset") && !strings.Contains(f, "past the last offset") {
		return 0, false
	}
	// "… for partition %d of %s[,] [at offset] %d …": the third argument.
	// kafka-go passes it as its own int64 type (humanOffset).
	if len(a) >= 3 {
		if v := reflect.ValueOf(a[2]); v.Kind() == reflect.Int64 {
			return v.Int(), true
		}
	}
	return math.MaxInt64, true
}

// inRange checks next against the partition's range and returns where to
// read from: next when it lies in [first, end] (or is a start position:
// kafka.FirstOffset, kafka.LastOffset), else what ConsumerConfig.OutOfRange
// says, after logging the gap as an error and passing it to OnGap. An
// error means stop reading (OutOfRangeFail). When the range cannot be
// read (brokers away), next: the reader's own check catches a gap later.
func (c *Consumer) inRange(ctx context.Context, partition int, next int64) (int64, error) {
	if next < 0 {
		return next, nil
	}
	first, end, err := c.offsets(ctx, partition)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Debug().Err(err).Int("partition", partition).Msg("kafka: the partition's offsets could not be read; reading on")
		}
		return next, nil
	}
	g := OffsetGap{Topic: c.cfg.Topic, Partition: partition, Next: next, First: first, End: end}
	switch {
	case next > end:
		g.Kind = GapPastEnd
	case next < first:
		g.Kind, g.Lost = GapDeleted, first-next
	default:
		return next, nil
	}
	if c.cfg.OnGap != nil {
		c.cfg.OnGap(g)
	}
	fail := c.cfg.OutOfRange == OutOfRangeFail
	then := "; reading it from its first offset (kafka.offset_out_of_range: earliest)"
	if fail {
		then = "; kafka.offset_out_of_range is fail: stopping"
	}
	c.log.Error().Str("kind", g.Kind).Int("partition", partition).Int64("next", next).Int64("first", first).Int64("end", end).Int64("lost", g.Lost).
		Msg("kafka: " + g.String() + then)
	if fail {
		return 0, &OffsetGapError{Gap: g}
	}
	return first, nil
}

// offsets returns the partition's first offset and the offset its next
// message gets, from the partition's leader.
func (c *Consumer) offsets(ctx context.Context, partition int) (first, end int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, b := range c.cfg.Brokers {
		var conn *kafka.Conn
		if conn, err = c.dialer.DialLeader(ctx, "tcp", b, c.cfg.Topic, partition); err != nil {
			continue
		}
		if dl, ok := ctx.Deadline(); ok {
			conn.SetDeadline(dl)
		}
		first, end, err = conn.ReadOffsets()
		conn.Close()
		if err == nil {
			return first, end, nil
		}
	}
	return 0, 0, fmt.Errorf("ingest: the offsets of partition %d of %s: %w", partition, c.cfg.Topic, err)
}
