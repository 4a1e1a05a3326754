//go:build amd64 && !purego

#include "textflag.h"

// func cosScaleAVX2(dst, src *float64, n int, s float64, c *[16]float64)
// dst[i] = s * (-(v + (v*v2)*p(v2))) with v = (|t - round(t)| - 0.25) * 2π,
// exactly as Cos2Pi in generator.go; n is a multiple of 4.
TEXT ·cosScaleAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+32(FP), DX
	VBROADCASTSD s+24(FP), Y15
	VBROADCASTSD 0(DX), Y14   // abs mask
	VBROADCASTSD 8(DX), Y13   // 0.25
	VBROADCASTSD 16(DX), Y12  // 2π
	VBROADCASTSD 24(DX), Y11  // sign mask
	VBROADCASTSD 32(DX), Y10  // sinCoef[8]
	VBROADCASTSD 40(DX), Y9   // sinCoef[7]
	VBROADCASTSD 48(DX), Y8   // sinCoef[6]
	VBROADCASTSD 56(DX), Y7   // sinCoef[5]
	VBROADCASTSD 64(DX), Y6   // sinCoef[4]
	VBROADCASTSD 72(DX), Y5   // sinCoef[3]
	VBROADCASTSD 80(DX), Y4   // sinCoef[2]
	VBROADCASTSD 88(DX), Y3   // sinCoef[1]
	XORQ AX, AX
loop:
	CMPQ AX, CX
	JGE done
	VMOVUPD (SI)(AX*8), Y0         // t
	VROUNDPD $0, Y0, Y1            // round to nearest even
	VSUBPD Y1, Y0, Y0              // y = t - round(t)
	VANDPD Y14, Y0, Y0             // |y|
	VSUBPD Y13, Y0, Y0             // u = |y| - 0.25
	VMULPD Y12, Y0, Y0             // v = u * 2π
	VMULPD Y0, Y0, Y1              // v2 = v*v
	VMULPD Y1, Y10, Y2             // p = c8*v2
	VADDPD Y9, Y2, Y2              //   + c7
	VMULPD Y1, Y2, Y2
	VADDPD Y8, Y2, Y2              //   + c6
	VMULPD Y1, Y2, Y2
	VADDPD Y7, Y2, Y2              //   + c5
	VMULPD Y1, Y2, Y2
	VADDPD Y6, Y2, Y2              //   + c4
	VMULPD Y1, Y2, Y2
	VADDPD Y5, Y2, Y2              //   + c3
	VMULPD Y1, Y2, Y2
	VADDPD Y4, Y2, Y2              //   + c2
	VMULPD Y1, Y2, Y2
	VADDPD Y3, Y2, Y2              //   + c1
	MOVQ c+32(FP), DX
	VBROADCASTSD 96(DX), Y6        // sinCoef[0] (Y6 reloaded below)
	VMULPD Y1, Y2, Y2
	VADDPD Y6, Y2, Y2              //   + c0
	VMULPD Y1, Y0, Y1              // v*v2
	VMULPD Y2, Y1, Y1              // (v*v2)*p
	VADDPD Y1, Y0, Y0              // v + (v*v2)*p
	VXORPD Y11, Y0, Y0             // negate
	VMULPD Y15, Y0, Y0             // s * cos
	VMOVUPD Y0, (DI)(AX*8)
	VBROADCASTSD 64(DX), Y6        // restore sinCoef[4]
	ADDQ $4, AX
	JMP loop
done:
	VZEROUPPER
	RET

// func phiTile4AVX2(z, x0, x1, x2, x3, om *float64, d, nb int)
// For c in 0..d-1, f in 0..nb-1 (step 4): z_q[f] += x_q[c] * om[c*nb+f],
// q = 0..3, z_q = z + q*nb. nb is a multiple of 4.
TEXT ·phiTile4AVX2(SB), NOSPLIT, $0-64
	MOVQ z+0(FP), DI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ x3+32(FP), R11
	MOVQ om+40(FP), SI
	MOVQ d+48(FP), R12
	MOVQ nb+56(FP), CX
	MOVQ CX, R13
	SHLQ $3, R13                   // nb*8 bytes
	XORQ BX, BX                    // c
cloop:
	CMPQ BX, R12
	JGE cdone
	VBROADCASTSD (R8)(BX*8), Y12
	VBROADCASTSD (R9)(BX*8), Y13
	VBROADCASTSD (R10)(BX*8), Y14
	VBROADCASTSD (R11)(BX*8), Y15
	MOVQ DI, R14                   // z0
	LEAQ (DI)(R13*1), R15          // z1
	XORQ AX, AX                    // f
floop:
	CMPQ AX, CX
	JGE fdone
	VMOVUPD (SI)(AX*8), Y0         // w
	VMULPD Y12, Y0, Y1
	VADDPD (R14)(AX*8), Y1, Y1
	VMOVUPD Y1, (R14)(AX*8)
	VMULPD Y13, Y0, Y2
	VADDPD (R15)(AX*8), Y2, Y2
	VMOVUPD Y2, (R15)(AX*8)
	LEAQ (R15)(R13*1), DX          // z2
	VMULPD Y14, Y0, Y3
	VADDPD (DX)(AX*8), Y3, Y3
	VMOVUPD Y3, (DX)(AX*8)
	LEAQ (DX)(R13*1), DX           // z3
	VMULPD Y15, Y0, Y4
	VADDPD (DX)(AX*8), Y4, Y4
	VMOVUPD Y4, (DX)(AX*8)
	ADDQ $4, AX
	JMP floop
fdone:
	ADDQ R13, SI                   // next row of om
	INCQ BX
	JMP cloop
cdone:
	VZEROUPPER
	RET

// func axpy4x4AVX2(dst, phi, a *float64, rows4, nb, k, k4 int, mask *[4]int64)
// For each group of four rows and each group of four columns q (the last
// one masked when k%4 ≠ 0): four accumulators start at dst, add
// phi[r, f] * a[f, q:q+4] for f in order, and are stored back, as AddMul.
TEXT ·axpy4x4AVX2(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ phi+8(FP), SI
	MOVQ mask+56(FP), DX
	VMOVDQU (DX), Y15              // tail mask
	MOVQ nb+32(FP), R9
	MOVQ k+40(FP), R12
	SHLQ $3, R12                   // k*8: row stride of dst and a
	MOVQ R9, R13
	SHLQ $3, R13                   // nb*8: row stride of phi
	XORQ BX, BX                    // r
rl4:
	CMPQ BX, rows4+24(FP)
	JGE rdone4
	LEAQ (SI)(R13*1), R14          // phi row r+1
	LEAQ (R14)(R13*1), R15         // phi row r+2
	LEAQ (R15)(R13*1), R10         // phi row r+3
	XORQ AX, AX                    // q
ql4:
	CMPQ AX, k4+48(FP)
	JGE qtail4
	LEAQ (DI)(AX*8), DX
	VMOVUPD (DX), Y0
	ADDQ R12, DX
	VMOVUPD (DX), Y1
	ADDQ R12, DX
	VMOVUPD (DX), Y2
	ADDQ R12, DX
	VMOVUPD (DX), Y3
	MOVQ a+16(FP), DX
	LEAQ (DX)(AX*8), DX            // &a[0, q]
	XORQ CX, CX                    // f
fl4:
	CMPQ CX, R9
	JGE fdone4
	VMOVUPD (DX), Y8
	VBROADCASTSD (SI)(CX*8), Y4
	VBROADCASTSD (R14)(CX*8), Y5
	VBROADCASTSD (R15)(CX*8), Y6
	VBROADCASTSD (R10)(CX*8), Y7
	VMULPD Y8, Y4, Y4
	VADDPD Y4, Y0, Y0
	VMULPD Y8, Y5, Y5
	VADDPD Y5, Y1, Y1
	VMULPD Y8, Y6, Y6
	VADDPD Y6, Y2, Y2
	VMULPD Y8, Y7, Y7
	VADDPD Y7, Y3, Y3
	ADDQ R12, DX
	INCQ CX
	JMP fl4
fdone4:
	LEAQ (DI)(AX*8), DX
	VMOVUPD Y0, (DX)
	ADDQ R12, DX
	VMOVUPD Y1, (DX)
	ADDQ R12, DX
	VMOVUPD Y2, (DX)
	ADDQ R12, DX
	VMOVUPD Y3, (DX)
	ADDQ $4, AX
	JMP ql4
qtail4:
	CMPQ AX, k+40(FP)
	JGE qdone4
	LEAQ (DI)(AX*8), DX
	VMASKMOVPD (DX), Y15, Y0
	ADDQ R12, DX
	VMASKMOVPD (DX), Y15, Y1
	ADDQ R12, DX
	VMASKMOVPD (DX), Y15, Y2
	ADDQ R12, DX
	VMASKMOVPD (DX), Y15, Y3
	MOVQ a+16(FP), DX
	LEAQ (DX)(AX*8), DX
	XORQ CX, CX
flt4:
	CMPQ CX, R9
	JGE fdonet4
	VMASKMOVPD (DX), Y15, Y8
	VBROADCASTSD (SI)(CX*8), Y4
	VBROADCASTSD (R14)(CX*8), Y5
	VBROADCASTSD (R15)(CX*8), Y6
	VBROADCASTSD (R10)(CX*8), Y7
	VMULPD Y8, Y4, Y4
	VADDPD Y4, Y0, Y0
	VMULPD Y8, Y5, Y5
	VADDPD Y5, Y1, Y1
	VMULPD Y8, Y6, Y6
	VADDPD Y6, Y2, Y2
	VMULPD Y8, Y7, Y7
	VADDPD Y7, Y3, Y3
	ADDQ R12, DX
	INCQ CX
	JMP flt4
fdonet4:
	LEAQ (DI)(AX*8), DX
	VMASKMOVPD Y0, Y15, (DX)
	ADDQ R12, DX
	VMASKMOVPD Y1, Y15, (DX)
	ADDQ R12, DX
	VMASKMOVPD Y2, Y15, (DX)
	ADDQ R12, DX
	VMASKMOVPD Y3, Y15, (DX)
qdone4:
	LEAQ (DI)(R12*4), DI           // next four dst rows
	LEAQ (SI)(R13*4), SI           // next four phi rows
	ADDQ $4, BX
	JMP rl4
rdone4:
	VZEROUPPER
	RET

// func phiTile4F32AVX2(z, x0, x1, x2, x3, om *float32, d, nb int)
// phiTile4AVX2 in float32: z_q[f] += x_q[c] * om[c*nb+f], eight lanes,
// product and sum rounded separately. nb is a multiple of 8.
TEXT ·phiTile4F32AVX2(SB), NOSPLIT, $0-64
	MOVQ z+0(FP), DI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ x3+32(FP), R11
	MOVQ om+40(FP), SI
	MOVQ d+48(FP), R12
	MOVQ nb+56(FP), CX
	MOVQ CX, R13
	SHLQ $2, R13                   // nb*4 bytes
	XORQ BX, BX                    // c
cloop32:
	CMPQ BX, R12
	JGE cdone32
	VBROADCASTSS (R8)(BX*4), Y12
	VBROADCASTSS (R9)(BX*4), Y13
	VBROADCASTSS (R10)(BX*4), Y14
	VBROADCASTSS (R11)(BX*4), Y15
	MOVQ DI, R14                   // z0
	LEAQ (DI)(R13*1), R15          // z1
	XORQ AX, AX                    // f
floop32:
	CMPQ AX, CX
	JGE fdone32
	VMOVUPS (SI)(AX*4), Y0         // w
	VMULPS Y12, Y0, Y1
	VADDPS (R14)(AX*4), Y1, Y1
	VMOVUPS Y1, (R14)(AX*4)
	VMULPS Y13, Y0, Y2
	VADDPS (R15)(AX*4), Y2, Y2
	VMOVUPS Y2, (R15)(AX*4)
	LEAQ (R15)(R13*1), DX          // z2
	VMULPS Y14, Y0, Y3
	VADDPS (DX)(AX*4), Y3, Y3
	VMOVUPS Y3, (DX)(AX*4)
	LEAQ (DX)(R13*1), DX           // z3
	VMULPS Y15, Y0, Y4
	VADDPS (DX)(AX*4), Y4, Y4
	VMOVUPS Y4, (DX)(AX*4)
	ADDQ $8, AX
	JMP floop32
fdone32:
	ADDQ R13, SI                   // next row of om
	INCQ BX
	JMP cloop32
cdone32:
	VZEROUPPER
	RET

// func phiTile4AVX512(z, x0, x1, x2, x3, om *float64, d, nb int)
// phiTile4AVX2 on eight lanes; nb is a multiple of 8.
TEXT ·phiTile4AVX512(SB), NOSPLIT, $0-64
	MOVQ z+0(FP), DI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ x3+32(FP), R11
	MOVQ om+40(FP), SI
	MOVQ d+48(FP), R12
	MOVQ nb+56(FP), CX
	MOVQ CX, R13
	SHLQ $3, R13
	XORQ BX, BX
cloop512:
	CMPQ BX, R12
	JGE cdone512
	VBROADCASTSD (R8)(BX*8), Z12
	VBROADCASTSD (R9)(BX*8), Z13
	VBROADCASTSD (R10)(BX*8), Z14
	VBROADCASTSD (R11)(BX*8), Z15
	MOVQ DI, R14
	LEAQ (DI)(R13*1), R15
	XORQ AX, AX
floop512:
	CMPQ AX, CX
	JGE fdone512
	VMOVUPD (SI)(AX*8), Z0
	VMULPD Z12, Z0, Z1
	VADDPD (R14)(AX*8), Z1, Z1
	VMOVUPD Z1, (R14)(AX*8)
	VMULPD Z13, Z0, Z2
	VADDPD (R15)(AX*8), Z2, Z2
	VMOVUPD Z2, (R15)(AX*8)
	LEAQ (R15)(R13*1), DX
	VMULPD Z14, Z0, Z3
	VADDPD (DX)(AX*8), Z3, Z3
	VMOVUPD Z3, (DX)(AX*8)
	LEAQ (DX)(R13*1), DX
	VMULPD Z15, Z0, Z4
	VADDPD (DX)(AX*8), Z4, Z4
	VMOVUPD Z4, (DX)(AX*8)
	ADDQ $8, AX
	JMP floop512
fdone512:
	ADDQ R13, SI
	INCQ BX
	JMP cloop512
cdone512:
	VZEROUPPER
	RET

// func phiTile4F32AVX512(z, x0, x1, x2, x3, om *float32, d, nb int)
// phiTile4F32AVX2 on sixteen lanes; nb is a multiple of 16.
TEXT ·phiTile4F32AVX512(SB), NOSPLIT, $0-64
	MOVQ z+0(FP), DI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ x3+32(FP), R11
	MOVQ om+40(FP), SI
	MOVQ d+48(FP), R12
	MOVQ nb+56(FP), CX
	MOVQ CX, R13
	SHLQ $2, R13
	XORQ BX, BX
cloop512s:
	CMPQ BX, R12
	JGE cdone512s
	VBROADCASTSS (R8)(BX*4), Z12
	VBROADCASTSS (R9)(BX*4), Z13
	VBROADCASTSS (R10)(BX*4), Z14
	VBROADCASTSS (R11)(BX*4), Z15
	MOVQ DI, R14
	LEAQ (DI)(R13*1), R15
	XORQ AX, AX
floop512s:
	CMPQ AX, CX
	JGE fdone512s
	VMOVUPS (SI)(AX*4), Z0
	VMULPS Z12, Z0, Z1
	VADDPS (R14)(AX*4), Z1, Z1
	VMOVUPS Z1, (R14)(AX*4)
	VMULPS Z13, Z0, Z2
	VADDPS (R15)(AX*4), Z2, Z2
	VMOVUPS Z2, (R15)(AX*4)
	LEAQ (R15)(R13*1), DX
	VMULPS Z14, Z0, Z3
	VADDPS (DX)(AX*4), Z3, Z3
	VMOVUPS Z3, (DX)(AX*4)
	LEAQ (DX)(R13*1), DX
	VMULPS Z15, Z0, Z4
	VADDPS (DX)(AX*4), Z4, Z4
	VMOVUPS Z4, (DX)(AX*4)
	ADDQ $16, AX
	JMP floop512s
fdone512s:
	ADDQ R13, SI
	INCQ BX
	JMP cloop512s
cdone512s:
	VZEROUPPER
	RET

// func cosScaleAVX512(dst, src *float64, n int, s float64, c *[16]float64)
// cosScaleAVX2 on eight lanes (VRNDSCALEPD $0 rounds to nearest even like
// VROUNDPD $0), two vectors per iteration so that their polynomial chains
// overlap; n is a multiple of 8.
TEXT ·cosScaleAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+32(FP), DX
	VBROADCASTSD s+24(FP), Z15
	VBROADCASTSD 0(DX), Z14
	VBROADCASTSD 8(DX), Z13
	VBROADCASTSD 16(DX), Z12
	VBROADCASTSD 24(DX), Z11
	VBROADCASTSD 32(DX), Z10
	VBROADCASTSD 40(DX), Z9
	VBROADCASTSD 48(DX), Z8
	VBROADCASTSD 56(DX), Z7
	VBROADCASTSD 64(DX), Z6
	VBROADCASTSD 72(DX), Z5
	VBROADCASTSD 80(DX), Z4
	VBROADCASTSD 88(DX), Z3
	VBROADCASTSD 96(DX), Z16
	XORQ AX, AX
	MOVQ CX, R8
	ANDQ $-16, R8                  // pairs of vectors: two independent chains
pair512c:
	CMPQ AX, R8
	JGE loop512c
	VMOVUPD (SI)(AX*8), Z0
	VMOVUPD 64(SI)(AX*8), Z17
	VRNDSCALEPD $0, Z0, Z1
	VRNDSCALEPD $0, Z17, Z18
	VSUBPD Z1, Z0, Z0
	VSUBPD Z18, Z17, Z17
	VANDPD Z14, Z0, Z0
	VANDPD Z14, Z17, Z17
	VSUBPD Z13, Z0, Z0
	VSUBPD Z13, Z17, Z17
	VMULPD Z12, Z0, Z0
	VMULPD Z12, Z17, Z17
	VMULPD Z0, Z0, Z1
	VMULPD Z17, Z17, Z18
	VMULPD Z1, Z10, Z2
	VMULPD Z18, Z10, Z19
	VADDPD Z9, Z2, Z2
	VADDPD Z9, Z19, Z19
	VMULPD Z1, Z2, Z2
	VMULPD Z18, Z19, Z19
	VADDPD Z8, Z2, Z2
	VADDPD Z8, Z19, Z19
	VMULPD Z1, Z2, Z2
	VMULPD Z18, Z19, Z19
	VADDPD Z7, Z2, Z2
	VADDPD Z7, Z19, Z19
	VMULPD Z1, Z2, Z2
	VMULPD Z18, Z19, Z19
	VADDPD Z6, Z2, Z2
	VADDPD Z6, Z19, Z19
	VMULPD Z1, Z2, Z2
	VMULPD Z18, Z19, Z19
	VADDPD Z5, Z2, Z2
	VADDPD Z5, Z19, Z19
	VMULPD Z1, Z2, Z2
	VMULPD Z18, Z19, Z19
	VADDPD Z4, Z2, Z2
	VADDPD Z4, Z19, Z19
	VMULPD Z1, Z2, Z2
	VMULPD Z18, Z19, Z19
	VADDPD Z3, Z2, Z2
	VADDPD Z3, Z19, Z19
	VMULPD Z1, Z2, Z2
	VMULPD Z18, Z19, Z19
	VADDPD Z16, Z2, Z2
	VADDPD Z16, Z19, Z19
	VMULPD Z1, Z0, Z1
	VMULPD Z18, Z17, Z18
	VMULPD Z2, Z1, Z1
	VMULPD Z19, Z18, Z18
	VADDPD Z1, Z0, Z0
	VADDPD Z18, Z17, Z17
	VXORPD Z11, Z0, Z0
	VXORPD Z11, Z17, Z17
	VMULPD Z15, Z0, Z0
	VMULPD Z15, Z17, Z17
	VMOVUPD Z0, (DI)(AX*8)
	VMOVUPD Z17, 64(DI)(AX*8)
	ADDQ $16, AX
	JMP pair512c
loop512c:
	CMPQ AX, CX
	JGE done512c
	VMOVUPD (SI)(AX*8), Z0
	VRNDSCALEPD $0, Z0, Z1
	VSUBPD Z1, Z0, Z0
	VANDPD Z14, Z0, Z0
	VSUBPD Z13, Z0, Z0
	VMULPD Z12, Z0, Z0
	VMULPD Z0, Z0, Z1
	VMULPD Z1, Z10, Z2
	VADDPD Z9, Z2, Z2
	VMULPD Z1, Z2, Z2
	VADDPD Z8, Z2, Z2
	VMULPD Z1, Z2, Z2
	VADDPD Z7, Z2, Z2
	VMULPD Z1, Z2, Z2
	VADDPD Z6, Z2, Z2
	VMULPD Z1, Z2, Z2
	VADDPD Z5, Z2, Z2
	VMULPD Z1, Z2, Z2
	VADDPD Z4, Z2, Z2
	VMULPD Z1, Z2, Z2
	VADDPD Z3, Z2, Z2
	VMULPD Z1, Z2, Z2
	VADDPD Z16, Z2, Z2
	VMULPD Z1, Z0, Z1
	VMULPD Z2, Z1, Z1
	VADDPD Z1, Z0, Z0
	VXORPD Z11, Z0, Z0
	VMULPD Z15, Z0, Z0
	VMOVUPD Z0, (DI)(AX*8)
	ADDQ $8, AX
	JMP loop512c
done512c:
	VZEROUPPER
	RET
