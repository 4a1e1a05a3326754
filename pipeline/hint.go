package pipeline

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/streamkpca/streamkpca/ingest"
)

// hintWindow is the messages over which the loop looks for a stream that
// it refuses for one reason (badHints).
const hintWindow = 200

// settingFor names the setting to check when most messages are refused
// for reason.
var settingFor = map[string]string{
	ingest.ReasonMalformed:  "kafka.format",
	ingest.ReasonDimension:  "kafka.dim",
	ingest.ReasonOversized:  "kafka.max_message_bytes",
	ingest.ReasonOutOfRange: "kafka.max_abs",
	ingest.ReasonDomain:     "learner.kernel",
	ingest.ReasonEmpty:      "kafka.topic",
	ingest.ReasonNonFinite:  "the producer (NaN or Inf values)",
	ingest.ReasonSchema:     "kafka.schema_registry.url (the registry the producer uses)",
}

// badHints counts the loop's recent messages by outcome and, when most of
// a window were refused for one reason, says which setting to check: in
// the log at once, and on /readyz and the status page until a window
// passes with most messages good. A first user's traps (a CSV stream
// into kafka.format json, a dimension fixed by kafka.dim) are then named
// within a window of messages, not left to a flood of dead letters.
type badHints struct {
	n, bad  int
	reasons map[string]int
	sample  []byte // a refused message's value, for the format's guess
}

// seen records one handled message (reason "" when it was good) and
// returns the hint when a window has just ended: "" once most were good.
func (h *badHints) seen(reason string, value []byte, format string) (hint string, done bool) {
	if h.reasons == nil {
		h.reasons = map[string]int{}
	}
	h.n++
	if reason != "" {
		h.bad++
		h.reasons[reason]++
		if h.sample == nil {
			h.sample = bytes.Clone(value[:min(len(value), 256)])
		}
	}
	if h.n < hintWindow {
		return "", false
	}
	defer func() { *h = badHints{} }()
	if 10*h.bad < 9*h.n {
		return "", true
	}
	top, most := "", 0
	for r, c := range h.reasons {
		if c > most || c == most && r < top {
			top, most = r, c
		}
	}
	hint = fmt.Sprintf("%d of the last %d messages were refused as %s: check %s", most, h.n, top, settingFor[top])
	if top == ingest.ReasonMalformed {
		if g := guessFormat(h.sample); g != "" && g != format {
			hint += fmt.Sprintf(" (it is %s; the messages look like %s)", format, g)
		} else {
			hint += " (it is " + format + ")"
		}
	}
	return hint, true
}

// guessFormat names the format a message's value looks like: json (an
// array or an object), csv (numbers separated by commas), the Schema
// Registry's wire format (a zero byte, a schema id), or "".
func guessFormat(v []byte) string {
	if len(v) > 5 && v[0] == 0 {
		// Registry ids count up from 1; a raw float's bytes rarely read
		// as a small one.
		if id := binary.BigEndian.Uint32(v[1:5]); id >= 1 && id < 1<<20 {
			return "the Schema Registry's wire format (avro, protobuf or jsonschema with kafka.schema_registry.url)"
		}
	}
	t := strings.TrimSpace(string(v))
	switch {
	case t == "":
		return ""
	case t[0] == '[' || t[0] == '{':
		return "json"
	}
	for _, f := range strings.Split(t, ",") {
		if _, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err != nil {
			return ""
		}
	}
	return "csv"
}
