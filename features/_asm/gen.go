// Command _asm generates package features' SIMD kernels with avo:
//
//	cd features/_asm && go run . -out ../simd_amd64.s
//
// (`go generate ./features` runs it; CI checks that the checked-in
// file is what this program writes). It is a module of its own so that the
// generator's dependencies stay out of streamkpca's.
//
// Every kernel performs exactly the float operations of the Go code it
// replaces, in the same order, each rounded (multiplies and adds are
// separate instructions, never fused), so the results are the Go code's
// bits; TestSIMDBitIdentical checks it. The tile and cosine kernels are
// written once and generated for AVX2 (YMM) and AVX-512 (ZMM), the tile
// kernel also for float32.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,!purego")
	cosScale(avx2)
	phiTile4(avx2, f64)
	axpy4x4()
	phiTile4(avx2, f32)
	phiTile4(avx512, f64)
	phiTile4(avx512, f32)
	cosScale(avx512)
	fwht4(avx2)
	fwht4(avx512)
	interleave4()
	signs4()
	structuredOut4()
	squares4()
	Generate()
}

// isa is a vector width: its name suffix and registers.
type isa struct {
	name  string
	bytes int
	v     func(i int) VecPhysical
}

var (
	avx2 = isa{"AVX2", 32, func(i int) VecPhysical {
		return [...]VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}[i]
	}}
	avx512 = isa{"AVX512", 64, func(i int) VecPhysical {
		return [...]VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19}[i]
	}}
)

// elem is a float type: its size, Go name and instructions.
type elem struct {
	size           int
	goName, suffix string
	bcast          func(mx, xyz Op)
	mul, add       func(a, b, dst Op)
	mov            func(src, dst Op)
}

var (
	f64 = elem{8, "float64", "", func(m, r Op) { VBROADCASTSD(m, r) }, func(a, b, d Op) { VMULPD(a, b, d) }, func(a, b, d Op) { VADDPD(a, b, d) }, func(s, d Op) { VMOVUPD(s, d) }}
	f32 = elem{4, "float32", "F32", func(m, r Op) { VBROADCASTSS(m, r) }, func(a, b, d Op) { VMULPS(a, b, d) }, func(a, b, d Op) { VADDPS(a, b, d) }, func(s, d Op) { VMOVUPS(s, d) }}
)

func mem(base Register, disp int) Mem { return Mem{Base: base, Disp: disp} }

func idx(base, index Register, scale uint8, disp int) Mem {
	return Mem{Base: base, Index: index, Scale: scale, Disp: disp}
}

// phiTile4 adds x_q[c]·Ω[c, f] to z_q[f] for four rows q, c in order.
func phiTile4(w isa, e elem) {
	name := "phiTile4" + e.suffix + w.name
	lanes := w.bytes / e.size
	TEXT(name, NOSPLIT, fmt.Sprintf("func(z, x0, x1, x2, x3, om *%s, d, nb int)", e.goName))
	Doc(fmt.Sprintf("For c in 0..d-1, f in 0..nb-1 (step %d): z_q[f] += x_q[c] * om[c*nb+f],", lanes),
		fmt.Sprintf("q = 0..3, z_q = z + q*nb, %s, product and sum rounded separately; nb is a multiple of %d.", e.goName, lanes))
	MOVQ(NewParamAddr("z", 0), RDI)
	MOVQ(NewParamAddr("x0", 8), R8)
	MOVQ(NewParamAddr("x1", 16), R9)
	MOVQ(NewParamAddr("x2", 24), R10)
	MOVQ(NewParamAddr("x3", 32), R11)
	MOVQ(NewParamAddr("om", 40), RSI)
	MOVQ(NewParamAddr("d", 48), R12)
	MOVQ(NewParamAddr("nb", 56), RCX)
	MOVQ(RCX, R13)
	shift := uint8(3)
	if e.size == 4 {
		shift = 2
	}
	SHLQ(U8(shift), R13) // nb in bytes
	XORQ(RBX, RBX)       // c
	l := func(s string) string { return s + "_" + name }
	Label(l("cloop"))
	CMPQ(RBX, R12)
	JGE(LabelRef(l("cdone")))
	xs := []Register{R8, R9, R10, R11}
	for q, x := range xs {
		e.bcast(idx(x, RBX, uint8(e.size), 0), w.v(12+q))
	}
	MOVQ(RDI, R14)                 // z0
	LEAQ(idx(RDI, R13, 1, 0), R15) // z1
	XORQ(RAX, RAX)                 // f
	Label(l("floop"))
	CMPQ(RAX, RCX)
	JGE(LabelRef(l("fdone")))
	e.mov(idx(RSI, RAX, uint8(e.size), 0), w.v(0)) // w
	zs := []Register{R14, R15, RDX, RDX}
	for q, z := range zs {
		switch q {
		case 2:
			LEAQ(idx(R15, R13, 1, 0), RDX) // z2
		case 3:
			LEAQ(idx(RDX, R13, 1, 0), RDX) // z3
		}
		e.mul(w.v(12+q), w.v(0), w.v(1+q))
		e.add(idx(z, RAX, uint8(e.size), 0), w.v(1+q), w.v(1+q))
		e.mov(w.v(1+q), idx(z, RAX, uint8(e.size), 0))
	}
	ADDQ(U8(lanes), RAX)
	JMP(LabelRef(l("floop")))
	Label(l("fdone"))
	ADDQ(R13, RSI) // next row of om
	INCQ(RBX)
	JMP(LabelRef(l("cloop")))
	Label(l("cdone"))
	VZEROUPPER()
	RET()
}

// cosScale sets dst[i] = s·Cos2Pi(src[i]): with v = (|t − round(t)| −
// 0.25)·2π, −(v + (v·v²)·p(v²)), p by Horner from the table c (see
// cosConsts). On AVX-512 two vectors go through the polynomial at once,
// so that their chains overlap.
func cosScale(w isa) {
	name := "cosScale" + w.name
	lanes := w.bytes / 8
	TEXT(name, NOSPLIT, "func(dst, src *float64, n int, s float64, c *[16]float64)")
	Doc("dst[i] = s * (-(v + (v*v2)*p(v2))) with v = (|t - round(t)| - 0.25) * 2π,",
		fmt.Sprintf("exactly as Cos2Pi in generator.go; n is a multiple of %d.", lanes))
	v := w.v
	MOVQ(NewParamAddr("dst", 0), RDI)
	MOVQ(NewParamAddr("src", 8), RSI)
	MOVQ(NewParamAddr("n", 16), RCX)
	MOVQ(NewParamAddr("c", 32), RDX)
	VBROADCASTSD(NewParamAddr("s", 24), v(15))
	// Constants: |·| mask, 0.25, 2π, sign mask, then the polynomial from
	// its highest coefficient (v(10)) down to sinCoef[1] (v(3)).
	for i := 0; i < 12; i++ {
		VBROADCASTSD(mem(RDX, 8*i), v(14-i))
	}
	// sinCoef[0]: AVX-512 has a register for it; AVX2 has none left and
	// reloads it into v(6) (sinCoef[4]'s) at the end of each polynomial.
	c0 := v(6)
	if w.bytes == 64 {
		c0 = v(16)
		VBROADCASTSD(mem(RDX, 96), c0)
	}
	XORQ(RAX, RAX)
	l := func(s string) string { return s + "_" + name }
	// chain computes the vectors at src[AX + 8·lanes·j] for the chains j
	// in parallel, instruction by instruction.
	chain := func(n int) {
		t := func(j, r int) VecPhysical { // register r of chain j
			if j == 0 {
				return v(r)
			}
			return v(17 + r) // chain 1: Z17 (t), Z18 (v2), Z19 (p)
		}
		each := func(f func(j int)) {
			for j := 0; j < n; j++ {
				f(j)
			}
		}
		each(func(j int) { VMOVUPD(idx(RSI, RAX, 8, j*w.bytes), t(j, 0)) })
		each(func(j int) {
			if w.bytes == 64 {
				VRNDSCALEPD(U8(0), t(j, 0), t(j, 1)) // round to nearest even
			} else {
				VROUNDPD(U8(0), t(j, 0), t(j, 1))
			}
		})
		each(func(j int) { VSUBPD(t(j, 1), t(j, 0), t(j, 0)) }) // y = t - round(t)
		each(func(j int) { VANDPD(v(14), t(j, 0), t(j, 0)) })   // |y|
		each(func(j int) { VSUBPD(v(13), t(j, 0), t(j, 0)) })   // u = |y| - 0.25
		each(func(j int) { VMULPD(v(12), t(j, 0), t(j, 0)) })   // v = u * 2π
		each(func(j int) { VMULPD(t(j, 0), t(j, 0), t(j, 1)) }) // v2
		each(func(j int) { VMULPD(t(j, 1), v(10), t(j, 2)) })   // p = c8*v2
		for c := 9; c >= 3; c-- {
			each(func(j int) { VADDPD(v(c), t(j, 2), t(j, 2)) })
			each(func(j int) { VMULPD(t(j, 1), t(j, 2), t(j, 2)) })
		}
		if w.bytes == 32 {
			MOVQ(NewParamAddr("c", 32), RDX)
			VBROADCASTSD(mem(RDX, 96), c0) // sinCoef[0] (v(6) restored below)
		}
		each(func(j int) { VADDPD(c0, t(j, 2), t(j, 2)) })      // + c0
		each(func(j int) { VMULPD(t(j, 1), t(j, 0), t(j, 1)) }) // v*v2
		each(func(j int) { VMULPD(t(j, 2), t(j, 1), t(j, 1)) }) // (v*v2)*p
		each(func(j int) { VADDPD(t(j, 1), t(j, 0), t(j, 0)) }) // v + (v*v2)*p
		each(func(j int) { VXORPD(v(11), t(j, 0), t(j, 0)) })   // negate
		each(func(j int) { VMULPD(v(15), t(j, 0), t(j, 0)) })   // s * cos
		each(func(j int) { VMOVUPD(t(j, 0), idx(RDI, RAX, 8, j*w.bytes)) })
		if w.bytes == 32 {
			VBROADCASTSD(mem(RDX, 64), v(6)) // restore sinCoef[4]
		}
		ADDQ(U8(n*lanes), RAX)
	}
	if w.bytes == 64 {
		MOVQ(RCX, R8)
		ANDQ(I8(-2*lanes), R8) // pairs of vectors: two independent chains
		Label(l("pair"))
		CMPQ(RAX, R8)
		JGE(LabelRef(l("loop")))
		chain(2)
		JMP(LabelRef(l("pair")))
	}
	Label(l("loop"))
	CMPQ(RAX, RCX)
	JGE(LabelRef(l("done")))
	chain(1)
	JMP(LabelRef(l("loop")))
	Label(l("done"))
	VZEROUPPER()
	RET()
}

// axpy4x4 is AddMul's kernel: for each group of four rows and each group
// of four columns q (the last one masked when k%4 ≠ 0), four accumulators
// start at dst, add phi[r, f]·a[f, q:q+4] for f in order, and are stored
// back.
func axpy4x4() {
	TEXT("axpy4x4AVX2", NOSPLIT, "func(dst, phi, a *float64, rows4, nb, k, k4 int, mask *[4]int64)")
	Doc("For each group of four rows and each group of four columns q (the last",
		"one masked when k%4 ≠ 0): four accumulators start at dst, add",
		"phi[r, f] * a[f, q:q+4] for f in order, and are stored back, as AddMul.")
	MOVQ(NewParamAddr("dst", 0), RDI)
	MOVQ(NewParamAddr("phi", 8), RSI)
	MOVQ(NewParamAddr("mask", 56), RDX)
	VMOVDQU(mem(RDX, 0), Y15) // tail mask
	MOVQ(NewParamAddr("nb", 32), R9)
	MOVQ(NewParamAddr("k", 40), R12)
	SHLQ(U8(3), R12) // k*8: row stride of dst and a
	MOVQ(R9, R13)
	SHLQ(U8(3), R13) // nb*8: row stride of phi
	XORQ(RBX, RBX)   // r
	Label("rows")
	CMPQ(RBX, NewParamAddr("rows4", 24))
	JGE(LabelRef("rdone"))
	LEAQ(idx(RSI, R13, 1, 0), R14) // phi row r+1
	LEAQ(idx(R14, R13, 1, 0), R15) // phi row r+2
	LEAQ(idx(R15, R13, 1, 0), R10) // phi row r+3
	XORQ(RAX, RAX)                 // q
	acc := []VecPhysical{Y0, Y1, Y2, Y3}
	prod := []VecPhysical{Y4, Y5, Y6, Y7}
	rows := []Register{RSI, R14, R15, R10}
	// group runs the f loop over one group of columns; masked loads and
	// stores the tail group.
	group := func(tag string, masked bool) {
		load := func(m Mem, r VecPhysical) {
			if masked {
				VMASKMOVPD(m, Y15, r)
			} else {
				VMOVUPD(m, r)
			}
		}
		store := func(r VecPhysical, m Mem) {
			if masked {
				VMASKMOVPD(r, Y15, m)
			} else {
				VMOVUPD(r, m)
			}
		}
		LEAQ(idx(RDI, RAX, 8, 0), RDX)
		for i, a := range acc {
			if i > 0 {
				ADDQ(R12, RDX)
			}
			load(mem(RDX, 0), a)
		}
		MOVQ(NewParamAddr("a", 16), RDX)
		LEAQ(idx(RDX, RAX, 8, 0), RDX) // &a[0, q]
		XORQ(RCX, RCX)                 // f
		Label("f" + tag)
		CMPQ(RCX, R9)
		JGE(LabelRef("fdone" + tag))
		load(mem(RDX, 0), Y8)
		for i, r := range rows {
			VBROADCASTSD(idx(r, RCX, 8, 0), prod[i])
		}
		for i := range acc {
			VMULPD(Y8, prod[i], prod[i])
			VADDPD(prod[i], acc[i], acc[i])
		}
		ADDQ(R12, RDX)
		INCQ(RCX)
		JMP(LabelRef("f" + tag))
		Label("fdone" + tag)
		LEAQ(idx(RDI, RAX, 8, 0), RDX)
		for i, a := range acc {
			if i > 0 {
				ADDQ(R12, RDX)
			}
			store(a, mem(RDX, 0))
		}
	}
	Label("cols")
	CMPQ(RAX, NewParamAddr("k4", 48))
	JGE(LabelRef("tail"))
	group("", false)
	ADDQ(U8(4), RAX)
	JMP(LabelRef("cols"))
	Label("tail")
	CMPQ(RAX, NewParamAddr("k", 40))
	JGE(LabelRef("next"))
	group("tail", true)
	Label("next")
	LEAQ(idx(RDI, R12, 4, 0), RDI) // next four dst rows
	LEAQ(idx(RSI, R13, 4, 0), RSI) // next four phi rows
	ADDQ(U8(4), RBX)
	JMP(LabelRef("rows"))
	Label("rdone")
	VZEROUPPER()
	RET()
}

// fwht4 applies the Walsh–Hadamard transform of length p to four rows
// interleaved (element i is the four values at v[4i:4i+4], one YMM), in
// place, stage h = p/2 first, exactly as fwht4Go: two stages at a time
// (h and h/2: a, b, c, d = elements i, i+h/2, i+h, i+3h/2 become
// (a+c)+(b+d), (a+c)−(b+d), (a−c)+(b−d), (a−c)−(b−d), the same sums as
// stage h then stage h/2), then stage 1 alone when log₂ p is odd. The
// AVX-512 variant takes two elements a register where h/2 ≥ 2.
func fwht4(w isa) {
	name := "fwht4" + w.name
	TEXT(name, NOSPLIT, "func(v *float64, p int)")
	Doc("Walsh–Hadamard transform of length p (a power of two ≥ 4) of four",
		"interleaved rows in place, stages p/2 … 1, as fwht4Go.")
	l := func(s string) string { return s + "_" + name }
	MOVQ(NewParamAddr("v", 0), RDI)
	MOVQ(NewParamAddr("p", 8), RCX)
	MOVQ(RCX, R12)
	SHLQ(U8(5), R12)
	ADDQ(RDI, R12) // end of v
	MOVQ(RCX, R8)
	SHRQ(U8(1), R8) // h
	// inner runs the radix-4 loop over one block at SI, elements a
	// register of reg(i) (YMM: one, ZMM: two).
	inner := func(tag string, reg func(int) VecPhysical, step int) {
		MOVQ(RSI, RDX)
		LEAQ(idx(RSI, R10, 1, 0), R13) // block's end of a's
		Label(l("in" + tag))
		CMPQ(RDX, R13)
		JGE(LabelRef(l("indone" + tag)))
		LEAQ(idx(RDX, R11, 1, 0), R14) // c = a + h
		VMOVUPD(mem(RDX, 0), reg(0))
		VMOVUPD(idx(RDX, R10, 1, 0), reg(1))
		VMOVUPD(mem(R14, 0), reg(2))
		VMOVUPD(idx(R14, R10, 1, 0), reg(3))
		VADDPD(reg(2), reg(0), reg(4)) // a+c
		VSUBPD(reg(2), reg(0), reg(5)) // a−c
		VADDPD(reg(3), reg(1), reg(6)) // b+d
		VSUBPD(reg(3), reg(1), reg(7)) // b−d
		VADDPD(reg(6), reg(4), reg(0))
		VSUBPD(reg(6), reg(4), reg(1))
		VADDPD(reg(7), reg(5), reg(2))
		VSUBPD(reg(7), reg(5), reg(3))
		VMOVUPD(reg(0), mem(RDX, 0))
		VMOVUPD(reg(1), idx(RDX, R10, 1, 0))
		VMOVUPD(reg(2), mem(R14, 0))
		VMOVUPD(reg(3), idx(R14, R10, 1, 0))
		ADDQ(U32(step), RDX)
		JMP(LabelRef(l("in" + tag)))
		Label(l("indone" + tag))
	}
	ymm := avx2.v
	Label(l("stage"))
	CMPQ(R8, U8(2))
	JL(LabelRef(l("last")))
	MOVQ(R8, R9)
	SHRQ(U8(1), R9) // q = h/2
	MOVQ(R9, R10)
	SHLQ(U8(5), R10) // q in bytes
	MOVQ(R8, R11)
	SHLQ(U8(5), R11) // h in bytes
	MOVQ(RDI, RSI)
	Label(l("blk"))
	CMPQ(RSI, R12)
	JGE(LabelRef(l("blkdone")))
	if w.bytes == 64 {
		CMPQ(R9, U8(2))
		JL(LabelRef(l("narrow")))
		inner("z", w.v, 64)
		JMP(LabelRef(l("next")))
		Label(l("narrow"))
	}
	inner("y", ymm, 32)
	Label(l("next"))
	ADDQ(R11, RSI)
	ADDQ(R11, RSI)
	JMP(LabelRef(l("blk")))
	Label(l("blkdone"))
	SHRQ(U8(2), R8)
	JMP(LabelRef(l("stage")))
	Label(l("last"))
	CMPQ(R8, U8(1))
	JNE(LabelRef(l("done")))
	MOVQ(RDI, RSI)
	Label(l("pair"))
	CMPQ(RSI, R12)
	JGE(LabelRef(l("done")))
	VMOVUPD(mem(RSI, 0), Y0)
	VMOVUPD(mem(RSI, 32), Y1)
	VADDPD(Y1, Y0, Y2)
	VSUBPD(Y1, Y0, Y3)
	VMOVUPD(Y2, mem(RSI, 0))
	VMOVUPD(Y3, mem(RSI, 32))
	ADDQ(U8(64), RSI)
	JMP(LabelRef(l("pair")))
	Label(l("done"))
	VZEROUPPER()
	RET()
}

// transpose4 transposes the 4×4 block in rows a, b, c, d (YMM) into
// columns c0…c3, using t0…t3 as scratch: moves only, no arithmetic.
func transpose4(a, b, c, d, t0, t1, t2, t3, c0, c1, c2, c3 VecPhysical) {
	VUNPCKLPD(b, a, t0) // a0 b0 a2 b2
	VUNPCKHPD(b, a, t1) // a1 b1 a3 b3
	VUNPCKLPD(d, c, t2) // c0 d0 c2 d2
	VUNPCKHPD(d, c, t3) // c1 d1 c3 d3
	VPERM2F128(U8(0x20), t2, t0, c0)
	VPERM2F128(U8(0x20), t3, t1, c1)
	VPERM2F128(U8(0x31), t2, t0, c2)
	VPERM2F128(U8(0x31), t3, t1, c3)
}

// interleave4 is the first step of a structured map's transform: four
// rows times the first sign vector, interleaved (v[4i+q] = x_q[i]·s[i]).
func interleave4() {
	TEXT("interleave4AVX2", NOSPLIT, "func(v, x0, x1, x2, x3, s *float64, d4 int)")
	Doc("v[4i+q] = x_q[i] * s[i] for i < d4 (a multiple of 4), q = 0..3: each",
		"product rounded, as the Go loop of stackTransform.")
	MOVQ(NewParamAddr("v", 0), RDI)
	MOVQ(NewParamAddr("x0", 8), R8)
	MOVQ(NewParamAddr("x1", 16), R9)
	MOVQ(NewParamAddr("x2", 24), R10)
	MOVQ(NewParamAddr("x3", 32), R11)
	MOVQ(NewParamAddr("s", 40), RSI)
	MOVQ(NewParamAddr("d4", 48), RCX)
	XORQ(RAX, RAX)
	Label("il_loop")
	CMPQ(RAX, RCX)
	JGE(LabelRef("il_done"))
	VMOVUPD(idx(RSI, RAX, 8, 0), Y12)
	for q, x := range []Register{R8, R9, R10, R11} {
		VMULPD(idx(x, RAX, 8, 0), Y12, avx2.v(q))
	}
	transpose4(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11)
	MOVQ(RAX, RDX)
	SHLQ(U8(5), RDX) // 32 bytes an element
	for j, c := range []VecPhysical{Y8, Y9, Y10, Y11} {
		VMOVUPD(c, idx(RDI, RDX, 1, 32*j))
	}
	ADDQ(U8(4), RAX)
	JMP(LabelRef("il_loop"))
	Label("il_done")
	VZEROUPPER()
	RET()
}

// signs4 multiplies element i of four interleaved rows by s[i].
func signs4() {
	TEXT("signs4AVX2", NOSPLIT, "func(v, s *float64, p int)")
	Doc("v[4i+q] *= s[i] for i < p, q = 0..3, as signs4.")
	MOVQ(NewParamAddr("v", 0), RDI)
	MOVQ(NewParamAddr("s", 8), RSI)
	MOVQ(NewParamAddr("p", 16), RCX)
	XORQ(RAX, RAX)
	Label("sg_loop")
	CMPQ(RAX, RCX)
	JGE(LabelRef("sg_done"))
	VBROADCASTSD(idx(RSI, RAX, 8, 0), Y1)
	MOVQ(RAX, RDX)
	SHLQ(U8(5), RDX)
	VMULPD(idx(RDI, RDX, 1, 0), Y1, Y0)
	VMOVUPD(Y0, idx(RDI, RDX, 1, 0))
	INCQ(RAX)
	JMP(LabelRef("sg_loop"))
	Label("sg_done")
	VZEROUPPER()
	RET()
}

// structuredOut4 writes z for four rows from their interleaved transform:
// z_q[j] = v[4j+q]·sc[j] or, for [cos, sin] pairs, z_q[2j] = that and
// z_q[2j+1] = that + ¾ (c holds ¾).
func structuredOut4() {
	TEXT("structuredOut4AVX2", NOSPLIT, "func(z *float64, stride int, v, sc *float64, n4 int, pair bool, c *float64)")
	Doc("For j < n4 (a multiple of 4) and q = 0..3, u = v[4j+q] * sc[j] (rounded);",
		"without pairs z[q*stride + j] = u, with pairs z[q*stride + 2j] = u and",
		"z[q*stride + 2j+1] = u + *c, as structuredOut. stride is in float64s.")
	MOVQ(NewParamAddr("z", 0), RDI)
	MOVQ(NewParamAddr("stride", 8), R12)
	SHLQ(U8(3), R12)
	MOVQ(NewParamAddr("v", 16), RSI)
	MOVQ(NewParamAddr("sc", 24), RBX)
	MOVQ(NewParamAddr("n4", 32), RCX)
	MOVBQZX(NewParamAddr("pair", 40), R13)
	MOVQ(NewParamAddr("c", 48), RDX)
	VBROADCASTSD(mem(RDX, 0), Y15)
	LEAQ(idx(RDI, R12, 1, 0), R8) // row 1
	LEAQ(idx(R8, R12, 1, 0), R9)  // row 2
	LEAQ(idx(R9, R12, 1, 0), R10) // row 3
	rows := []Register{RDI, R8, R9, R10}
	XORQ(RAX, RAX)
	Label("so_loop")
	CMPQ(RAX, RCX)
	JGE(LabelRef("so_done"))
	MOVQ(RAX, RDX)
	SHLQ(U8(5), RDX)
	for j := 0; j < 4; j++ {
		VMOVUPD(idx(RSI, RDX, 1, 32*j), avx2.v(j))
	}
	transpose4(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11) // Y8+q: row q's four frequencies
	VMOVUPD(idx(RBX, RAX, 8, 0), Y12)
	for q := 0; q < 4; q++ {
		VMULPD(Y12, avx2.v(8+q), avx2.v(8+q))
	}
	TESTQ(R13, R13)
	JNZ(LabelRef("so_pair"))
	for q, r := range rows {
		VMOVUPD(avx2.v(8+q), idx(r, RAX, 8, 0))
	}
	JMP(LabelRef("so_next"))
	Label("so_pair")
	MOVQ(RAX, RDX)
	SHLQ(U8(4), RDX) // 2j float64s in bytes
	for q, r := range rows {
		u := avx2.v(8 + q)
		VADDPD(Y15, u, Y13)              // w = u + ¾
		VUNPCKLPD(Y13, u, Y0)            // u0 w0 u2 w2
		VUNPCKHPD(Y13, u, Y1)            // u1 w1 u3 w3
		VPERM2F128(U8(0x20), Y1, Y0, Y2) // u0 w0 u1 w1
		VPERM2F128(U8(0x31), Y1, Y0, Y3) // u2 w2 u3 w3
		VMOVUPD(Y2, idx(r, RDX, 1, 0))
		VMOVUPD(Y3, idx(r, RDX, 1, 32))
	}
	Label("so_next")
	ADDQ(U8(4), RAX)
	JMP(LabelRef("so_loop"))
	Label("so_done")
	VZEROUPPER()
	RET()
}

// squares4 generates squares4AVX2: four rows at a time, one accumulator
// a row, each lane l summing phi[r, f]² over f ≡ l (mod 4) in order —
// AddSquares' four running sums, lane for lane.
func squares4() {
	TEXT("squares4AVX2", NOSPLIT, "func(lanes, phi *float64, rows4, nb, nb4 int)")
	Doc("For each group of four rows: four lanes a row, lane l the sum of",
		"phi[r, f]*phi[r, f] over f = l, l+4, … < nb4 in order, each product",
		"rounded (no fused multiply-add), stored to lanes[4r:4r+4], as",
		"AddSquares' running sums.")
	MOVQ(NewParamAddr("lanes", 0), RDI)
	MOVQ(NewParamAddr("phi", 8), RSI)
	MOVQ(NewParamAddr("nb", 24), R9)
	SHLQ(U8(3), R9) // nb*8: row stride of phi
	MOVQ(NewParamAddr("nb4", 32), R8)
	XORQ(RBX, RBX) // r
	acc := []VecPhysical{Y0, Y1, Y2, Y3}
	sq := []VecPhysical{Y4, Y5, Y6, Y7}
	rows := []Register{RSI, R14, R15, R10}
	Label("rows")
	CMPQ(RBX, NewParamAddr("rows4", 16))
	JGE(LabelRef("done"))
	LEAQ(idx(RSI, R9, 1, 0), R14)
	LEAQ(idx(R14, R9, 1, 0), R15)
	LEAQ(idx(R15, R9, 1, 0), R10)
	for _, a := range acc {
		VXORPD(a, a, a)
	}
	XORQ(RCX, RCX) // f
	Label("f")
	CMPQ(RCX, R8)
	JGE(LabelRef("fdone"))
	for i, r := range rows {
		VMOVUPD(idx(r, RCX, 8, 0), sq[i])
	}
	for i := range rows {
		VMULPD(sq[i], sq[i], sq[i])
	}
	for i, a := range acc {
		VADDPD(sq[i], a, a)
	}
	ADDQ(U8(4), RCX)
	JMP(LabelRef("f"))
	Label("fdone")
	for i, a := range acc {
		VMOVUPD(a, mem(RDI, 32*i))
	}
	ADDQ(U8(128), RDI)
	LEAQ(idx(RSI, R9, 4, 0), RSI) // next four phi rows
	ADDQ(U8(4), RBX)
	JMP(LabelRef("rows"))
	Label("done")
	VZEROUPPER()
	RET()
}
