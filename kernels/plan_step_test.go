package kernels

import (
	"encoding/binary"
	"errors"
	"regexp"
	"strconv"
	"testing"
)

// Tests of device plan steps that need no GPU.

// sourceDefines returns the program's integer #defines by name.
func sourceDefines(t *testing.T) map[string]uint64 {
	t.Helper()
	defs := map[string]uint64{}
	re := regexp.MustCompile(`(?m)^#define (LC_\w+) (\d+)u?\b`)
	for _, m := range re.FindAllStringSubmatch(Source(), -1) {
		v, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if old, ok := defs[m[1]]; ok && old != v {
			t.Fatalf("%s defined twice: %d and %d", m[1], old, v)
		}
		defs[m[1]] = v
	}
	return defs
}

// The step kinds, element types, operators and limits the interpreter
// reads are the codes the host writes.
func TestPlanCodesMatchSource(t *testing.T) {
	defs := sourceDefines(t)
	want := map[string]uint64{
		"LC_STEP_COPY": uint64(StepCopy), "LC_STEP_STORE": uint64(StepStore), "LC_STEP_ADD": uint64(StepAdd),
		"LC_STEP_WAIT": uint64(StepWait), "LC_STEP_FILL_BYTE": uint64(StepFillByte), "LC_STEP_FILL_IOTA": uint64(StepFillIota),
		"LC_STEP_FILL_RAND": uint64(StepFillRand), "LC_STEP_PUT_SIGNAL": uint64(StepPutSignal), "LC_STEP_LINE_PUT": uint64(StepLinePut),
		"LC_STEP_LINE_WAIT": uint64(StepLineWait), "LC_STEP_REDUCE": uint64(StepReduce), "LC_STEP_GRID": uint64(StepGrid),
		"LC_PLAN_SMALL": PlanSmall, "LC_PLAN_THREADS": PlanThreads, "LC_PLAN_MID_THREADS": PlanMidThreads, "LC_PLAN_CACHE": PlanCache,
		"LC_PLAN_MOVES": PlanMoves, "LC_PLAN_MOVE_SHIFT": planMoveBit,
		"LC_CHAIN_MAX": PlanChainMax, "LC_LINE_GROUP_MAX": PlanLineGroupMax, "LC_LINE_GROUP_SHIFT": LineGroupShift,
		"LC_PLAN_JOB_SIZE": PlanJobSize, "LC_SPREAD_MAX": PlanSpreadMax,
		"LC_PLAN_SPREAD": planSpreadFlag, "LC_SPREAD_WORDS": planSpreadWords,
		"LC_SERVE_SLOTS": PlanServeSlots, "LC_SERVE_CMD_SIZE": PlanServeCmdSize, "LC_SERVE_RUN": serveRun, "LC_SERVE_STOP": serveStop,
		"LC_RED_SUM": uint64(Sum), "LC_RED_PROD": uint64(Prod), "LC_RED_MIN": uint64(Min), "LC_RED_MAX": uint64(Max),
	}
	for _, dt := range DTypes() {
		want["LC_DT_"+map[DType]string{F32: "F32", F64: "F64", F16: "F16", BF16: "BF16", I32: "I32", I64: "I64", U32: "U32", U64: "U64"}[dt]] = uint64(dt)
	}
	for name, v := range want {
		got, ok := defs[name]
		if !ok {
			t.Errorf("%s is not defined in the program", name)
		} else if got != v {
			t.Errorf("%s is %d in the program, %d on the host", name, got, v)
		}
	}
}

// A reduce step is encoded as every step is, with its type and operator
// in the value; it is wide, and Check refuses what the interpreter could
// not run.
func TestReduceStep(t *testing.T) {
	s := PlanStep{Kind: StepReduce, Op: 7, Dst: 0x1000, Src: 0x2008, N: 24, Value: ReduceStepValue(F64, Min)}
	b := EncodePlan([]PlanStep{{Kind: StepWait}, s})
	if len(b) != 2*PlanStepSize {
		t.Fatalf("%d bytes", len(b))
	}
	p := b[PlanStepSize:]
	if k := binary.LittleEndian.Uint32(p[0:]); k != 10 {
		t.Errorf("kind %d, want 10", k)
	}
	for off, want := range map[int]uint64{16: 0x1000, 24: 0x2008, 32: 24, 40: 1 | 2<<8} {
		if got := binary.LittleEndian.Uint64(p[off:]); got != want {
			t.Errorf("word at %d: %#x, want %#x", off, got, want)
		}
	}
	if op := binary.LittleEndian.Uint32(p[12:]); op != 7 {
		t.Errorf("op %d", op)
	}
	if !s.Wide() || (PlanStep{Kind: StepCopy, N: PlanSmall}).Wide() || !(PlanStep{Kind: StepReduce, N: 2}).Wide() {
		t.Error("Wide: reductions of any size and copies above PlanSmall only")
	}
	if err := s.Check(); err != nil {
		t.Errorf("a good step: %v", err)
	}
	for _, tc := range DTypes() {
		for _, op := range RedOps() {
			if err := (PlanStep{Kind: StepReduce, N: 4 * tc.Size(), Dst: 64, Src: 128, Value: ReduceStepValue(tc, op)}).Check(); err != nil {
				t.Errorf("%s %s: %v", tc, op, err)
			}
		}
	}
	for name, bad := range map[string]PlanStep{
		"unknown type":        {Kind: StepReduce, N: 8, Value: ReduceStepValue(DType(8), Sum)},
		"unknown op":          {Kind: StepReduce, N: 8, Value: ReduceStepValue(F32, RedOp(4))},
		"high bits":           {Kind: StepReduce, N: 8, Value: 1 << 16},
		"part of an element":  {Kind: StepReduce, N: 6, Value: ReduceStepValue(F32, Sum)},
		"misaligned dst":      {Kind: StepReduce, N: 8, Dst: 2, Value: ReduceStepValue(F32, Sum)},
		"misaligned src (bf)": {Kind: StepReduce, N: 8, Src: 1, Value: ReduceStepValue(BF16, Sum)},
	} {
		if err := bad.Check(); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (PlanStep{Kind: StepCopy, N: 3, Dst: 1}).Check(); err != nil {
		t.Errorf("a copy: %v", err)
	}
}

// A launch with a larger block than the interpreter's (or the server's)
// launch bound is refused before anything is enqueued.
func TestPlanThreadsBound(t *testing.T) {
	var k *Kernels
	err := k.Plan(nil, PlanSpec{Steps: 64, Period: 1, Count: 1, Threads: PlanThreads + 32})
	if !errors.Is(err, ErrBadSpec) {
		t.Fatalf("%v", err)
	}
	// The server is built for blocks of at most PlanMidThreads.
	err = k.PlanServe(nil, 64, 1, 64, 64, PlanMidThreads+32)
	if !errors.Is(err, ErrBadSpec) {
		t.Fatalf("server of %d threads: %v", PlanMidThreads+32, err)
	}
}

// Blocks of up to PlanMidThreads run the interpreter built for that bound
// (more registers a thread), larger ones the one built for PlanThreads;
// both are in the program (kernels.go's list, checked against the source
// by TestNamesListEveryKernel).
func TestPlanKernelFor(t *testing.T) {
	for _, c := range []struct {
		threads uint32
		want    string
	}{{32, KernelPlanMid}, {PlanSmallThreads, KernelPlanMid}, {PlanMidThreads, KernelPlanMid},
		{PlanMidThreads + 32, KernelPlan}, {PlanThreads, KernelPlan}} {
		if got := planKernel(c.threads); got != c.want {
			t.Errorf("%d threads: %s, want %s", c.threads, got, c.want)
		}
	}
	if PlanMidThreads >= PlanThreads {
		t.Fatalf("PlanMidThreads %d, PlanThreads %d: the mid kernel's bound must be the smaller", PlanMidThreads, PlanThreads)
	}
}

// Plans whose steps move at most PlanSmallBytes get the small block;
// wider ones a block that takes their widest step in one turn of four
// words a thread, up to PlanMidThreads; above PlanMidBytes, PlanThreads.
func TestPlanThreadsFor(t *testing.T) {
	small := []PlanStep{{Kind: StepCopy, N: 4096}, {Kind: StepAdd, Value: 1 << 40}, {Kind: StepWait, N: 1 << 20},
		{Kind: StepLinePut, N: 2048}, {Kind: StepReduce, N: 64}}
	if got := PlanThreadsFor(small); got != PlanSmallThreads {
		t.Fatalf("small plan: %d threads", got)
	}
	for _, k := range []StepKind{StepCopy, StepFillByte, StepFillIota, StepFillRand, StepReduce} {
		for _, tt := range []struct {
			n    uint64
			want uint32
		}{{PlanSmallBytes + 1, PlanSmallThreads}, {8192 + 16, 160}, {16384, 256}, {65536, PlanMidThreads}, {PlanMidBytes, PlanMidThreads}, {PlanMidBytes + 16, PlanThreads}} {
			big := append(append([]PlanStep(nil), small...), PlanStep{Kind: k, N: tt.n})
			if got := PlanThreadsFor(big); got != tt.want {
				t.Errorf("a %d-byte step of kind %d: %d threads, want %d", tt.n, k, got, tt.want)
			}
		}
	}
	// Lines carry 8 bytes in 16.
	if got := PlanThreadsFor([]PlanStep{{Kind: StepLineWait, N: 8192}}); got != 256 {
		t.Errorf("an 8 KiB drain: %d threads, want 256", got)
	}
}
