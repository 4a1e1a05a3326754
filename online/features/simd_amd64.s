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

// func axpyRowsAVX2(dst, phi, a *float64, rows, nb, k, k4 int)
// For r < rows, f < nb, q < k4 (step 4):
// dst[r*k+q] += phi[r*nb+f] * a[f*k+q], f in order (as AddMul).
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ phi+8(FP), SI
	MOVQ rows+24(FP), R8
	MOVQ nb+32(FP), R9
	MOVQ k+40(FP), R10
	MOVQ k4+48(FP), R11
	SHLQ $3, R10                   // k*8 bytes (row stride of dst and a)
	XORQ BX, BX                    // r
rloop:
	CMPQ BX, R8
	JGE rdone
	MOVQ a+16(FP), DX              // a row f
	XORQ CX, CX                    // f
floop2:
	CMPQ CX, R9
	JGE fdone2
	VBROADCASTSD (SI)(CX*8), Y0    // phi[r, f]
	XORQ AX, AX                    // q
qloop:
	CMPQ AX, R11
	JGE qdone
	VMULPD (DX)(AX*8), Y0, Y1
	VADDPD (DI)(AX*8), Y1, Y1
	VMOVUPD Y1, (DI)(AX*8)
	ADDQ $4, AX
	JMP qloop
qdone:
	ADDQ R10, DX
	INCQ CX
	JMP floop2
fdone2:
	LEAQ (SI)(R9*8), SI            // next phi row
	ADDQ R10, DI                   // next dst row
	INCQ BX
	JMP rloop
rdone:
	VZEROUPPER
	RET
