// Package snapshot is the model users get: the versioned binary format of a
// learned model (a list of random-feature seeds plus coefficients), its
// on-disk [Store], and [Model], which projects new points from a snapshot
// alone. It depends on nothing but the standard library and the
// features package; clients import it without the learner.
//
// # Format v4 (.skpca)
//
// All integers and floats are little-endian.
//
//	offset        size  field
//	0             8     magic "SKPCASNP"
//	8             4     uint32 format version (4, 3 or 2; 1 is read too)
//	12            4     uint32 header length H (≤ MaxHeaderBytes)
//	16            H     JSON header ([Header]), UTF-8
//	16+H          8     uint64 number of payload values N
//	24+H          8·N   float64 payload: alpha (rows×k, row-major), then
//	                    beta for two-view models; then each landmark
//	                    view's points; then the learner state
//	                    ([Covariance] or [Averaged]), if the header
//	                    has one, then the [Challenger]'s (its window:
//	                    raw rows for one view, both learners' values
//	                    at each pair for two; its coefficients and
//	                    own state)
//	24+H+8N       4     uint32 CRC-32C (Castagnoli) of bytes [0, 24+H+8N)
//
// Format v1 is the same without the learner state; v2 is v3 without
// [Averaged] (the subspace solver's last iterate, behind the average it
// serves); v3 is v4 without a [Challenger] (the learner that may replace
// the model on a gradual change, learner.forget: follow). A snapshot is
// written in the oldest version that holds it, so only stored copies
// with [Averaged] state are v3, with a challenger v4, and v2 readers load
// everything published. Readers load v1 files unchanged
// (testdata/golden_v1.skpca). The learner state lets a
// restored learner continue bit for bit; a projection does not use it,
// and the published copy of a model leaves it out ([Snapshot.Served]).
//
// N must equal what the header implies (blocks·block_size·k per view,
// k + oversample when a kpca learner keeps columns beyond the k it
// serves: Header.Oversample, left out by Served). A
// decoder rejects an unknown magic or version, a header or coefficient count
// over the limits, a count that does not match the header, trailing or
// missing bytes and a bad checksum, before it allocates for the payload.
//
// # Invariants
//
//   - The header's seed list is explicit (one uint64 per block, written as
//     16 hex digits so that JSON readers in any language keep all 64 bits).
//   - Same header and coefficients ⇒ bit-identical projections on every
//     platform (see package features for why).
//   - A Store never exposes a partially written file: it writes a temp file,
//     fsyncs it, renames it into place and fsyncs the directory.
package snapshot
