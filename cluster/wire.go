package cluster

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/streamkpca/streamkpca/snapshot"
)

// The payloads of a round, each: the magic "SKC3" (SKC1 before the
// messages shed joined first and moments, SKC2 before the growth votes
// joined moments), a kind byte, then the
// kind's fields, little-endian. A float64 array is its length (uint32)
// then its IEEE-754 bits (8 bytes each); a string its length (uint32)
// then its bytes; offsets are a count (uint32) then per partition the
// topic (string), the partition (uint32) and the next offset (int64).
//
//	status   fingerprint [32]byte, settings (string), has model (byte), step, samples (uint64)
//	state    a snapshot's bytes (.skpca), or nothing when not the sender
//	first    rows, dim (uint32), the rows (float64 array), offsets, messages shed (uint64)
//	moments  step, samples (uint64), rows (uint32), Σh, upper Σh·hᵀ (float64 arrays), offsets,
//	         the held-out points' component scores (float64 array, rows×k), messages shed (uint64),
//	         growth vote: hold (byte), the budget wanted (uint64)
//	partial  Grad, New, Sums, NewSums (float64 arrays); all empty from a member without rows
//	abort    the member's reason (string)
//	slice    has a part (byte), the four arrays' lengths (uint32 each),
//	         the receiver's slice of the flattened part (float64 array)
//	reduced  any member had a part (byte), the lengths, the sender's
//	         slice summed over the members (float64 array)
const (
	kindStatus byte = 1 + iota
	kindState
	kindFirst
	kindMoments
	kindPartial
	kindAbort
	kindSlice
	kindReduced
)

var wireMagic = [4]byte{'S', 'K', 'C', '3'}

// errWire is a payload that does not decode: a member of another version,
// or a bug; the round fails.
var errWire = errors.New("cluster: malformed payload")

// enc appends a payload.
type enc struct{ b []byte }

func (e *enc) start(kind byte) {
	e.b = append(append(e.b[:0], wireMagic[:]...), kind)
}

func (e *enc) u8(v byte) { e.b = append(e.b, v) }

// flag writes v as a byte, 1 or 0.
func (e *enc) flag(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

func (e *enc) str(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
}

// bytes encodes a length-prefixed byte string.
func (e *enc) bytes(b []byte) {
	e.u32(uint32(len(b)))
	e.b = append(e.b, b...)
}

func (e *enc) floats(v []float64) {
	e.u32(uint32(len(v)))
	e.b = slices.Grow(e.b, 8*len(v))
	for _, f := range v {
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(f))
	}
}

func (e *enc) offsets(o Offsets) {
	list := o.List()
	e.u32(uint32(len(list)))
	for _, p := range list {
		e.str(p.Topic)
		e.u32(uint32(p.Partition))
		e.u64(uint64(p.Next))
	}
}

// dec reads a payload; the first failure sticks in err.
type dec struct {
	b   []byte
	err error
}

// open checks the magic and returns the kind.
func open(b []byte) (*dec, byte) {
	d := &dec{b: b}
	if len(b) < 5 || [4]byte(b[:4]) != wireMagic {
		d.err = fmt.Errorf("%w: %d bytes without the magic", errWire, len(b))
		return d, 0
	}
	d.b = b[5:]
	return d, b[4]
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: %d bytes wanted, %d left", errWire, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *dec) str() string { return string(d.take(int(d.u32()))) }

// bytes decodes a length-prefixed byte string (shares d's buffer).
func (d *dec) bytes() []byte { return d.take(int(d.u32())) }

// floats decodes an array into dst (reused when it has room).
func (d *dec) floats(dst []float64) []float64 {
	n := int(d.u32())
	raw := d.take(8 * n)
	if d.err != nil {
		return dst[:0]
	}
	dst = slices.Grow(dst[:0], n)[:n]
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return dst
}

func (d *dec) offsets() Offsets {
	n := int(d.u32())
	if d.err == nil && n > len(d.b)/16 {
		d.err = fmt.Errorf("%w: %d offsets in %d bytes", errWire, n, len(d.b))
	}
	o := Offsets{}
	for i := 0; i < n && d.err == nil; i++ {
		topic := d.str()
		p, next := int(d.u32()), int64(d.u64())
		o.set(topic, p, next)
	}
	return o
}

// end reports the first failure, or trailing bytes.
func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errWire, len(d.b))
	}
	return d.err
}

// Offsets are, per topic and partition, the next offset to learn from:
// what a step's batches cover, and, merged over the steps, what the model
// has learned through (the shape ingest.Source.Commit takes).
type Offsets map[string]map[int]int64

func (o Offsets) set(topic string, p int, next int64) {
	if o[topic] == nil {
		o[topic] = map[int]int64{}
	}
	o[topic][p] = next
}

// Merge moves o's partitions forward to the offsets of add (offsets only
// grow: a partition's larger offset wins).
func (o Offsets) Merge(add Offsets) {
	for topic, ps := range add {
		for p, next := range ps {
			if cur, ok := o[topic][p]; !ok || next > cur {
				o.set(topic, p, next)
			}
		}
	}
}

// List returns o sorted by topic and partition, as a snapshot stores it.
func (o Offsets) List() []snapshot.Offset {
	var list []snapshot.Offset
	for topic, ps := range o {
		for p, next := range ps {
			list = append(list, snapshot.Offset{Topic: topic, Partition: p, Next: next})
		}
	}
	slices.SortFunc(list, func(a, b snapshot.Offset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return list
}

// OffsetsOf returns a snapshot's offsets as Offsets.
func OffsetsOf(list []snapshot.Offset) Offsets {
	o := Offsets{}
	for _, p := range list {
		o.set(p.Topic, p.Partition, p.Next)
	}
	return o
}
