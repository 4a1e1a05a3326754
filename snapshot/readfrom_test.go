package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/memwatch"
)

// large returns sample() grown to blocks blocks of 4,096 features, k =
// 8: 8·4,096·blocks coefficients.
func large(blocks int) *Snapshot {
	s := sample()
	s.Header.BlockSize, s.Header.K, s.Header.MaxFeatures = 4096, 8, 4096*blocks
	s.Header.Views[0].Center = make([]float64, 8)
	s.Header.Seeds = make(Seeds, blocks)
	for i := range s.Header.Seeds {
		s.Header.Seeds[i] = uint64(i + 1)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	s.Coef = [][]float64{make([]float64, 8*4096*blocks)}
	for i := range s.Coef[0] {
		s.Coef[0][i] = rng.NormFloat64()
	}
	return s
}

// A reader that says its length (bytes.Reader) is decoded into room
// made at once for the coefficients, the encoded ones never held whole:
// the heap peaks at about the model's size. A reader that does not say
// it is decoded into room grown as the bytes come (doubling): about
// twice, with the outgrown room not yet collected. Both decode the same
// model.
func TestReadFromASizedReaderHoldsTheModelOnce(t *testing.T) {
	s := large(128) // 32 MiB of coefficients
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	size := float64(8 * len(s.Coef[0]))
	peak := func(r io.Reader) (float64, *Snapshot) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		stop := memwatch.Start(time.Millisecond)
		var got Snapshot
		_, err := got.ReadFrom(r)
		p := stop()
		if err != nil {
			t.Fatal(err)
		}
		return float64(p-min(p, base)) / size, &got
	}
	sized, a := peak(bytes.NewReader(data))
	unsized, b := peak(struct{ io.Reader }{bytes.NewReader(data)})
	t.Logf("peak heap over the model's size: %.2f from a sized reader, %.2f from another", sized, unsized)
	if !slices.Equal(a.Coef[0], s.Coef[0]) || !slices.Equal(b.Coef[0], s.Coef[0]) {
		t.Fatal("the decoded coefficients differ from the encoded ones")
	}
	if sized > 1.4 || unsized > 2.3 {
		t.Errorf("peak heap %.2f× the model from a sized reader (want about 1), %.2f× from another (want at most about 2)", sized, unsized)
	}
}

// A coefficient that is not finite, under a checksum that matches, is
// refused by ReadFrom from a sized reader as by UnmarshalBinary, with
// the same error; under one that does not, the checksum's error comes
// first, as there.
func TestReadFromASizedReaderRefuses(t *testing.T) {
	s := sample()
	s.Coef[0][5] = 0
	data, _ := s.MarshalBinary()
	nan := slices.Clone(data)
	at := bytes.Index(nan, make([]byte, 8)) // the zero coefficient
	copy(nan[at:], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	flipped := slices.Clone(nan)
	binary.LittleEndian.PutUint32(nan[len(nan)-4:], crc32.Checksum(nan[:len(nan)-4], castagnoli))
	for name, c := range map[string]struct {
		data []byte
		want error
	}{"a NaN": {nan, ErrNonFinite}, "a NaN and a stale checksum": {flipped, ErrChecksum}} {
		var u, r Snapshot
		errU := u.UnmarshalBinary(c.data)
		_, errR := r.ReadFrom(bytes.NewReader(c.data))
		if !errors.Is(errR, c.want) || errU == nil || errU.Error() != errR.Error() {
			t.Errorf("%s: UnmarshalBinary %v, ReadFrom %v; want %v from both", name, errU, errR, c.want)
		}
	}
}

// Defect (issue 58, item 15): a reader's size claim was trusted whatever
// it said: an object info in the store (writable by anyone with the
// bucket's write access) claiming the length a forged header gives made
// every Watch client allocate the whole payload — up to 8 GiB — before a
// byte of it arrived or the digest was checked. Here a header of 2³⁰
// bytes of coefficients, a size claim to match and 1 KiB of payload: the
// read fails as truncated having allocated little.
func TestASizeClaimCannotForceALargeAllocation(t *testing.T) {
	s := large(1)
	blocks := 4096 // 8·4,096·4,096 coefficients: 1 GiB
	s.Header.MaxFeatures = 4096 * blocks
	s.Header.Seeds = make(Seeds, blocks)
	for i := range s.Header.Seeds {
		s.Header.Seeds[i] = uint64(i + 1)
	}
	hdr, err := json.Marshal(&s.Header)
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(8 * 4096 * blocks)
	data := append([]byte(Magic), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(data[8:], s.FormatVersion())
	binary.LittleEndian.PutUint32(data[12:], uint32(len(hdr)))
	data = append(data, hdr...)
	data = binary.LittleEndian.AppendUint64(data, n)
	data = append(data, make([]byte, 1024)...)
	claim := int64(16+len(hdr)+8) + 8*int64(n) + 4
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var got Snapshot
	_, err = got.ReadFrom(sizedReader{bytes.NewReader(data), claim})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("ReadFrom: %v; want ErrTruncated", err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 64<<20 {
		t.Errorf("a forged size claim made ReadFrom allocate %d MiB before the payload arrived; want at most 64", a>>20)
	}
}

// sizedReader is a reader with a size claim, true or not.
type sizedReader struct {
	io.Reader
	size int64
}

func (r sizedReader) Size() int64 { return r.size }
