package pipeline

import "testing"

// TestShedLedgerCountsWhatTheOffsetsCover: messages shed past the last
// learned row of a partition are not in a snapshot cut then; after a
// restart from that snapshot they are read and shed again, and counted
// once. Counting every shed message in the cut (as the loop did) gave 3
// for 2 messages here.
func TestShedLedgerCountsWhatTheOffsetsCover(t *testing.T) {
	var s shedLedger
	s.shed(0, 10)
	s.shed(0, 20)
	s.shed(1, 5)
	// A cut while rows are pending: partition 0 learned through 14,
	// partition 1 through 9.
	if got := s.cover(map[int]int64{0: 15, 1: 10}); got != 2 {
		t.Fatalf("the cut covers %d shed messages, want 2 (offsets 10 and 5)", got)
	}
	// A crash and a restart from that snapshot: offset 20 is read again
	// and shed again; the next cut covers it.
	snapShed := s.covered
	var r shedLedger
	r.restore(snapShed)
	r.shed(0, 20)
	if got := r.cover(map[int]int64{0: 21, 1: 10}); got != 3 {
		t.Errorf("after the restart the snapshot counts %d shed messages, want 3 (each of the 3 once)", got)
	}
	// Partitions the cut does not name keep their open sheds.
	r.shed(2, 7)
	if got := r.cover(map[int]int64{0: 30}); got != 3 || len(r.open[2]) != 1 {
		t.Errorf("a partition absent from the cut: covered %d, open %v", got, r.open[2])
	}
}
