package output

import (
	"math"
	"strconv"
)

// Source names a record's input message.
type Source struct {
	Topic     string
	Partition int
	Offset    int64
}

// Record is one scored message (see the package doc).
type Record struct {
	Source Source
	// Key is the input message's key; nil: "topic/partition/offset".
	Key []byte
	// HasModel: the message was scored; Incarnation and Version name the
	// version, Projection its k values.
	HasModel    bool
	Incarnation string
	Version     uint64
	Projection  []float64
	// ProjectionY is a two-view model's y view's k values for a message
	// that has a y (nil otherwise: no "projection_y" in the JSON).
	ProjectionY []float64
	// Residual and Novelty are NaN when unknown (null in JSON).
	Residual, Novelty float64
	Novel             bool
}

// Message is a record as the producer stores it.
type Message struct {
	Key, Value []byte
	Headers    []Header
	// Partition is the source partition: the producer maps it onto the
	// output topic's partitions.
	Partition int
}

// Header is one Kafka header.
type Header struct {
	Key   string
	Value []byte
}

// Encode returns r as a Message: the JSON value of the package doc, the
// same bytes for the same record on every run.
func (r *Record) Encode() Message {
	b := make([]byte, 0, 176+24*(len(r.Projection)+len(r.ProjectionY)))
	b = append(b, `{"source":{"topic":`...)
	b = strconv.AppendQuote(b, r.Source.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Source.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Source.Offset, 10)
	b = append(b, `},"model":`...)
	if !r.HasModel {
		b = append(b, `null,"projection":null,"residual":null,"novelty":null,"novel":false}`...)
	} else {
		b = append(b, `{"incarnation":`...)
		b = strconv.AppendQuote(b, r.Incarnation)
		b = append(b, `,"version":`...)
		b = strconv.AppendUint(b, r.Version, 10)
		b = append(b, `},"projection":[`...)
		b = appendNumbers(b, r.Projection)
		if r.ProjectionY != nil {
			b = append(b, `],"projection_y":[`...)
			b = appendNumbers(b, r.ProjectionY)
		}
		b = append(b, `],"residual":`...)
		b = appendNumber(b, r.Residual)
		b = append(b, `,"novelty":`...)
		b = appendNumber(b, r.Novelty)
		b = append(b, `,"novel":`...)
		b = strconv.AppendBool(b, r.Novel)
		b = append(b, '}')
	}
	key := r.Key
	if key == nil {
		key = []byte(r.Source.Topic + "/" + strconv.Itoa(r.Source.Partition) + "/" + strconv.FormatInt(r.Source.Offset, 10))
	}
	h := []Header{
		{Key: "source-topic", Value: []byte(r.Source.Topic)},
		{Key: "source-partition", Value: []byte(strconv.Itoa(r.Source.Partition))},
		{Key: "source-offset", Value: []byte(strconv.FormatInt(r.Source.Offset, 10))},
	}
	if r.HasModel {
		h = append(h, Header{Key: "model-incarnation", Value: []byte(r.Incarnation)},
			Header{Key: "model-version", Value: []byte(strconv.FormatUint(r.Version, 10))})
	}
	return Message{Key: key, Value: b, Headers: h, Partition: r.Source.Partition}
}

// appendNumbers appends vs, comma-separated.
func appendNumbers(b []byte, vs []float64) []byte {
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNumber(b, v)
	}
	return b
}

// appendNumber appends v as JSON's shortest round-tripping number, or null
// for NaN or ±Inf.
func appendNumber(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
