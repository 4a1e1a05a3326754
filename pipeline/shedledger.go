package pipeline

import "slices"

// shedLedger counts the messages shed to keep up (load shedding) the way
// a snapshot must: only those its offsets cover. A message shed after
// the last learned row of its partition is not covered by a snapshot cut
// then (its offsets are the learned ones while rows are pending); a
// restart reads it again and sheds or learns it, so counting it in that
// snapshot counted it twice (shed + shed, or shed + learned).
type shedLedger struct {
	covered uint64
	open    map[int][]int64 // per partition, the offsets shed and not yet covered, ascending
}

// shed records the message at offset of partition as shed.
func (s *shedLedger) shed(partition int, offset int64) {
	if s.open == nil {
		s.open = make(map[int][]int64)
	}
	s.open[partition] = append(s.open[partition], offset)
}

// cover moves the shed messages below next[partition] (a cut's offsets)
// to the covered count and returns it: what the cut's snapshot records.
func (s *shedLedger) cover(next map[int]int64) uint64 {
	for part, offs := range s.open {
		n, ok := next[part]
		if !ok {
			continue
		}
		i, _ := slices.BinarySearch(offs, n)
		s.covered += uint64(i)
		s.open[part] = offs[i:]
	}
	return s.covered
}

// restore sets the covered count from a restored snapshot and forgets
// the rest: a restart reads those messages again.
func (s *shedLedger) restore(covered uint64) {
	s.covered, s.open = covered, nil
}

// rewind covers the partition's open shed messages: its reads start again
// below them (a topic created again), and those messages are gone.
func (s *shedLedger) rewind(partition int) {
	s.covered += uint64(len(s.open[partition]))
	delete(s.open, partition)
}
