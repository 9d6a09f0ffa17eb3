#include "textflag.h"

// Vector clocks joined with AVX2: vc[i] = max(vc[i], at[i]) for the first
// n entries (uint32, n a multiple of 8), 32 entries a turn while there
// are, then 8; returns whether any entry rose. The caller does the rest,
// and checks the CPU.

// func joinClockAVX2(vc, at unsafe.Pointer, n int) bool
TEXT ·joinClockAVX2(SB), NOSPLIT, $0-25
	MOVQ  vc+0(FP), DI
	MOVQ  at+8(FP), SI
	MOVQ  n+16(FP), CX
	SHLQ  $2, CX // bytes
	VPXOR Y7, Y7, Y7 // the bits that rose, or-ed together
joinClockAVX2_big:
	CMPQ    CX, $128
	JB      joinClockAVX2_one
	VMOVDQU (DI), Y0
	VMOVDQU 32(DI), Y1
	VMOVDQU 64(DI), Y2
	VMOVDQU 96(DI), Y3
	VPMAXUD (SI), Y0, Y4
	VPMAXUD 32(SI), Y1, Y5
	VPMAXUD 64(SI), Y2, Y6
	VPMAXUD 96(SI), Y3, Y8
	VPXOR   Y0, Y4, Y0
	VPXOR   Y1, Y5, Y1
	VPXOR   Y2, Y6, Y2
	VPXOR   Y3, Y8, Y3
	VPOR    Y0, Y7, Y7
	VPOR    Y1, Y7, Y7
	VPOR    Y2, Y7, Y7
	VPOR    Y3, Y7, Y7
	VMOVDQU Y4, (DI)
	VMOVDQU Y5, 32(DI)
	VMOVDQU Y6, 64(DI)
	VMOVDQU Y8, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	SUBQ    $128, CX
	JMP     joinClockAVX2_big
joinClockAVX2_one:
	CMPQ    CX, $32
	JB      joinClockAVX2_done
	VMOVDQU (DI), Y0
	VPMAXUD (SI), Y0, Y4
	VPXOR   Y0, Y4, Y0
	VPOR    Y0, Y7, Y7
	VMOVDQU Y4, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $32, CX
	JMP     joinClockAVX2_one
joinClockAVX2_done:
	VPTEST     Y7, Y7
	SETNE      AL
	VZEROUPPER
	MOVB       AL, ret+24(FP)
	RET
