// Command _asm generates online/internal/dense's AVX-512 micro-kernels with avo:
//
//	cd online/internal/dense/_asm && go run . -out ../kernel_amd64.s
//
// (`go generate ./internal/dense` runs it; CI checks that the checked-in
// file is what this program writes). It is a module of its own so that the
// generator's dependencies stay out of streamkpca's.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The register tile: mr rows of C, each nr = 16 columns in two ZMM
// registers: 24 accumulators, two B vectors and temporaries in 32.
const (
	mr = 12
	nr = 16
)

func main() {
	ConstraintExpr("amd64,!purego")
	kernel("mulAddAVX512")
	kernelAVX2("mulAdd4AVX2")
	Generate()
}

// kernel writes the mr×nr micro-kernel: for r < k, in order,
//
//	c[i·ldc + j] += a[r·mr + i] · b[r·nr + j]
//
// with the product rounded before the sum (VMULPD then VADDPD, never
// fused), so each element is the same float64 operations in the same
// order as the Go kernel's loop. (A subtraction is this kernel on a
// negated A: c − round(a·b) = c + round((−a)·b) exactly.)
func kernel(name string) {
	TEXT(name, NOSPLIT, "func(k int, a, b, c *float64, ldc int)")
	Doc(fmt.Sprintf("%s: for r < k in order, c[i·ldc+j] += round(a[r·%d+i]·b[r·%d+j]), i < %d, j < %d; k ≥ 1.", name, mr, nr, mr, nr))
	k, a, b, c, ldc := params()

	var acc [mr][2]reg.VecVirtual
	row := GP64()
	MOVQ(c, row)
	for i := range acc {
		acc[i][0], acc[i][1] = ZMM(), ZMM()
		VMOVUPD(Mem{Base: row}, acc[i][0])
		VMOVUPD(Mem{Base: row, Disp: 64}, acc[i][1])
		if i < mr-1 {
			ADDQ(ldc, row)
		}
	}

	Label("loop")
	b0, b1 := ZMM(), ZMM()
	VMOVUPD(Mem{Base: b}, b0)
	VMOVUPD(Mem{Base: b, Disp: 64}, b1)
	for i := range acc {
		for h, bv := range []reg.VecVirtual{b0, b1} {
			t := ZMM()
			VMULPD_BCST(Mem{Base: a, Disp: 8 * i}, bv, t)
			VADDPD(t, acc[i][h], acc[i][h])
		}
	}
	nextStep(k, a, b)

	MOVQ(c, row)
	for i := range acc {
		VMOVUPD(acc[i][0], Mem{Base: row})
		VMOVUPD(acc[i][1], Mem{Base: row, Disp: 64})
		if i < mr-1 {
			ADDQ(ldc, row)
		}
	}
	VZEROUPPER()
	RET()
}

// params loads the kernels' arguments, ldc scaled from elements to bytes.
func params() (k, a, b, c, ldc reg.Register) {
	k = Load(Param("k"), GP64())
	a = Load(Param("a"), GP64())
	b = Load(Param("b"), GP64())
	c = Load(Param("c"), GP64())
	ldc = Load(Param("ldc"), GP64())
	SHLQ(U8(3), ldc)
	return
}

// nextStep moves a and b to the panels' next step (mr and nr values on)
// and loops back while steps remain.
func nextStep(k, a, b reg.Register) {
	ADDQ(U32(8*mr), a)
	ADDQ(U32(8*nr), b)
	DECQ(k)
	JNZ(LabelRef("loop"))
}

// kernelAVX2 writes the AVX2 micro-kernel for a quarter of the tile: mr
// rows by four columns, c[i·ldc + j] += a[r·mr + i]·b[r·nr + j] for r < k
// in order, j < 4 (the caller runs it on the four quarters). Twelve YMM
// accumulators, the B vector and a broadcast fit in sixteen registers;
// products are rounded before the sums as in the AVX-512 kernel.
func kernelAVX2(name string) {
	TEXT(name, NOSPLIT, "func(k int, a, b, c *float64, ldc int)")
	Doc(fmt.Sprintf("%s: for r < k in order, c[i·ldc+j] += round(a[r·%d+i]·b[r·%d+j]), i < %d, j < 4; k ≥ 1.", name, mr, nr, mr))
	k, a, b, c, ldc := params()
	var acc [mr]reg.VecVirtual
	row := GP64()
	MOVQ(c, row)
	for i := range acc {
		acc[i] = YMM()
		VMOVUPD(Mem{Base: row}, acc[i])
		if i < mr-1 {
			ADDQ(ldc, row)
		}
	}
	Label("loop")
	bv := YMM()
	VMOVUPD(Mem{Base: b}, bv)
	for i := range acc {
		t := YMM()
		VBROADCASTSD(Mem{Base: a, Disp: 8 * i}, t)
		VMULPD(bv, t, t)
		VADDPD(t, acc[i], acc[i])
	}
	nextStep(k, a, b)
	MOVQ(c, row)
	for i := range acc {
		VMOVUPD(acc[i], Mem{Base: row})
		if i < mr-1 {
			ADDQ(ldc, row)
		}
	}
	VZEROUPPER()
	RET()
}
