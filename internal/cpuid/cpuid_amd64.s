#include "textflag.h"

// func tscAux() uint32
TEXT ·tscAux(SB), NOSPLIT, $0-4
	RDTSCP
	MOVL CX, ret+0(FP)
	RET

// func extFeaturesEDX() uint32
TEXT ·extFeaturesEDX(SB), NOSPLIT, $0-4
	MOVL $0x80000001, AX
	XORL CX, CX
	CPUID
	MOVL DX, ret+0(FP)
	RET
