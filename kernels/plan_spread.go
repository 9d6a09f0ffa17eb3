package kernels

// Spread plans (sync_grid.cu): the interpreter on several blocks, each
// running every step, its share of each wide step's 16-byte words; block 0
// alone makes the small copies and, once every block got there, the
// signals; a StepGrid makes every block wait for all.

// PlanSpreadMax is the most blocks a spread plan runs on (sync_grid.cu's
// LC_SPREAD_MAX).
const PlanSpreadMax = 32

// planSpreadFlag is sync_plan.cu's LC_PLAN_SPREAD; planSpreadWords the
// words of a spread plan's job area (sync_grid.cu's LC_SPREAD_WORDS),
// every one zero between launches.
const (
	planSpreadFlag  = 8
	planSpreadWords = 35
)

// PlanSpreadBlocks is the default of the most blocks a device-mode plan
// spreads over (knobs.PlanBlocks), PlanSpreadBytes the bytes of its widest
// step each gets, and PlanSpreadMin the narrowest widest step that spreads
// at all. On 2 and 4 H200s plans spread over 2 and 4 blocks for 16 and
// 32 KiB steps took longer a call than on one, and over 8 for 64 KiB
// steps less (docs/results/reductions.md, "Spread plans").
const (
	PlanSpreadBlocks = 8
	PlanSpreadBytes  = 8192
	PlanSpreadMin    = 64 << 10
)

// PlanSpreadFor is how many blocks a device-mode plan of steps spreads
// over: one for every perBlock bytes of its widest copy, fill or
// reduction, at most most (and PlanSpreadMax); 1 (no spread) where that
// step has less than PlanSpreadMin bytes or that makes less than 2,
// where it has more than PlanCache steps, or where it has line steps
// (whose drains every thread of one block polls).
func PlanSpreadFor(steps []PlanStep, most uint32, perBlock uint64) uint32 {
	if most <= 1 || perBlock == 0 || len(steps) > PlanCache {
		return 1
	}
	var widest uint64
	for _, s := range steps {
		switch s.Kind {
		case StepLinePut, StepLineWait:
			return 1
		case StepCopy, StepFillByte, StepFillIota, StepFillRand, StepReduce:
			widest = max(widest, s.N)
		}
	}
	b := (widest + perBlock - 1) / perBlock
	if b < 2 || widest < PlanSpreadMin {
		return 1
	}
	return uint32(min(b, uint64(most), PlanSpreadMax))
}

// PlanSpreadThreads is the block size of a spread plan of steps over
// blocks blocks: PlanThreadsFor's rule for each block's share of the
// widest step.
func PlanSpreadThreads(steps []PlanStep, blocks uint32) uint32 {
	return threadsForWords((widestWords(steps) + uint64(blocks) - 1) / uint64(max(blocks, 1)))
}

// Who makes a step's accesses in a spread plan.
const (
	byBlock0 = iota // block 0 alone (small copies, signals)
	byWords         // every block, its share of the 16-byte words from the operand's start
	byOther         // every block, cut some other way (fills, unaligned steps)
	byEvery         // every block, the whole range (waits)
)

// spreadAccess is a range of bytes a step of a spread plan reads or
// writes, and how the blocks share it.
type spreadAccess struct {
	lo, hi uint64
	write  bool
	who    int
}

// accessesOf lists the bytes step s touches in a spread plan.
func accessesOf(s PlanStep) []spreadAccess {
	rng := func(p, n uint64, write bool, who int) spreadAccess { return spreadAccess{p, p + n, write, who} }
	aligned := uint64(s.Dst)%16 == 0 && uint64(s.Src)%16 == 0 && s.N%16 == 0
	words := byOther
	if aligned {
		words = byWords
	}
	switch s.Kind {
	case StepCopy:
		if !s.Wide() {
			return []spreadAccess{rng(uint64(s.Src), s.N, false, byBlock0), rng(uint64(s.Dst), s.N, true, byBlock0)}
		}
		return []spreadAccess{rng(uint64(s.Src), s.N, false, words), rng(uint64(s.Dst), s.N, true, words)}
	case StepReduce:
		return []spreadAccess{rng(uint64(s.Src), s.N, false, words), rng(uint64(s.Dst), s.N, true, words)}
	case StepFillByte, StepFillIota, StepFillRand:
		return []spreadAccess{rng(uint64(s.Dst), s.N, true, byOther)}
	case StepPutSignal:
		return []spreadAccess{rng(uint64(s.Src), s.N, false, byBlock0), rng(uint64(s.Dst), s.N, true, byBlock0),
			rng(uint64(s.Aux), 8, true, byBlock0)}
	case StepStore, StepAdd:
		return []spreadAccess{rng(uint64(s.Dst), 8, true, byBlock0)}
	case StepWait:
		slots := max(s.Count&WaitSlotsMask, 1)
		out := make([]spreadAccess, 0, slots)
		for k := uint64(0); k < uint64(slots); k++ {
			out = append(out, rng(uint64(s.Dst)+k*s.N, 8, false, byEvery))
		}
		return out
	}
	return nil
}

// spreadClash reports whether b, after a with no grid step between, may
// touch a byte of a's from another block, one of them writing it: the
// ranges meet, and they are not both block 0's, nor both cut by words
// from starts a whole number of the grid's turns (16 * threads bytes)
// apart.
func spreadClash(a, b spreadAccess, turn uint64) bool {
	if !a.write && !b.write || a.hi <= b.lo || b.hi <= a.lo {
		return false
	}
	if a.who == byBlock0 && b.who == byBlock0 {
		return false
	}
	d := a.lo - b.lo
	if b.lo > a.lo {
		d = b.lo - a.lo
	}
	return !(a.who == byWords && b.who == byWords && d%turn == 0)
}

// SpreadSteps puts a StepGrid before each step of a spread plan (blocks
// blocks of threads threads) that may touch bytes another block touched
// since the last one (spreadClash), replay after replay: the steps wrap
// around, a launch's start being a meeting of its own. at[i] is where
// step i went. ok is false when the result has more than PlanCache steps
// (the plan then runs on one block).
func SpreadSteps(steps []PlanStep, blocks, threads uint32) (out []PlanStep, at []int, ok bool) {
	turn := 16 * uint64(blocks) * uint64(threads)
	grid := make([]bool, len(steps))
	for changed := true; changed; {
		changed = false
		var seen []spreadAccess
		for j := 0; j < 2*len(steps); j++ {
			i := j % len(steps)
			if grid[i] {
				seen = seen[:0]
			}
			acc := accessesOf(steps[i])
			if !grid[i] && clashes(seen, acc, turn) {
				grid[i], changed = true, true
				seen = seen[:0]
			}
			seen = append(seen, acc...)
		}
	}
	at = make([]int, len(steps))
	for i, s := range steps {
		if grid[i] {
			out = append(out, PlanStep{Kind: StepGrid, Op: s.Op})
		}
		at[i] = len(out)
		out = append(out, s)
	}
	return out, at, len(out) <= PlanCache
}

// clashes reports whether any of acc clashes with any of seen.
func clashes(seen, acc []spreadAccess, turn uint64) bool {
	for _, b := range acc {
		for _, a := range seen {
			if spreadClash(a, b, turn) {
				return true
			}
		}
	}
	return false
}
