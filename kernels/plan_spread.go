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
// at all in a plan of more than two ranks, PlanSpreadMinPair in a plan of
// two. Plans spread over 2 and 4 blocks for 16 and 32 KiB steps took
// longer a call than on one on 2 and 4 H200s, and over 8 for 64 KiB steps
// less on 4 (docs/results/reductions.md, "Spread plans"); on 2, where a
// plan on one block is served by the waiting kernel and a spread one is
// launched, 64 KiB steps took less on one block and 128 KiB steps more
// ("One block for 64 KiB steps on 2 GPUs").
const (
	PlanSpreadBlocks  = 8
	PlanSpreadBytes   = 8192
	PlanSpreadMin     = 64 << 10
	PlanSpreadMinPair = 128 << 10
)

// PlanSpreadMinFor is the narrowest widest step that spreads in a plan of
// ranks ranks.
func PlanSpreadMinFor(ranks int) uint64 {
	if ranks <= 2 {
		return PlanSpreadMinPair
	}
	return PlanSpreadMin
}

// PlanSpreadFor is how many blocks a device-mode plan of steps spreads
// over: one for every perBlock bytes of its widest copy, fill or
// reduction, or of the lines of its widest group of line puts or drains
// (16 bytes a line, every line to or from every peer of the group), at
// most most (and PlanSpreadMax); 1 (no spread) where that step has less
// than least bytes (PlanSpreadMinFor) or that makes less than 2, or where
// it has more than PlanCache steps.
func PlanSpreadFor(steps []PlanStep, most uint32, perBlock, least uint64) uint32 {
	if most <= 1 || perBlock == 0 || len(steps) > PlanCache {
		return 1
	}
	var widest uint64
	for i, s := range steps {
		switch s.Kind {
		case StepLinePut, StepLineWait:
			widest = max(widest, lineGroupBytes(steps[i:]))
		case StepCopy, StepFillByte, StepFillIota, StepFillRand, StepReduce:
			widest = max(widest, s.N)
		}
	}
	b := (widest + perBlock - 1) / perBlock
	if b < 2 || widest < least {
		return 1
	}
	return uint32(min(b, uint64(most), PlanSpreadMax))
}

// lineGroupBytes is the bytes of lines the line step steps[0] moves with
// the group it heads (groupLines' marks; the step alone when it heads
// none): 16 a line.
func lineGroupBytes(steps []PlanStep) uint64 {
	s := steps[0]
	k := uint64(1)
	switch {
	case s.Kind == StepLinePut && s.Count > 1:
		k = uint64(s.Count)
	case s.Kind == StepLineWait && s.Count>>LineGroupShift > 1:
		k = uint64(s.Count >> LineGroupShift)
	}
	var n uint64
	for _, t := range steps[:min(k, uint64(len(steps)))] {
		n += 16 * ((t.N + 7) / 8)
	}
	return n
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

// accessesFor lists the bytes step s touches in a spread plan; grouped:
// s belongs to a group of line steps, whose head moves every member's
// lines, cut over the grid.
func accessesFor(s PlanStep, grouped bool) []spreadAccess {
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
	case StepLinePut:
		// Reads its source (a block's share of the lines, or thread 0 of
		// block 0 for a line alone); writes only the peer's line area.
		return []spreadAccess{rng(uint64(s.Src), s.N, false, lineWho(s, grouped))}
	case StepLineWait:
		// Reads its lines; writes its payload (a block's share, or block
		// 0 alone for a line alone: every block waits for that one) and,
		// block 0, its slot.
		return []spreadAccess{rng(uint64(s.Dst), 16*((s.N+7)/8), false, byEvery),
			rng(uint64(s.Src), s.N, true, lineWho(s, grouped)), rng(uint64(s.Aux), 8, true, byBlock0)}
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

// lineWho is who makes a line step's accesses in a spread plan: every
// block its share of the lines (cut by lines, not words), or block 0 for a
// line alone (sync_plan.cu: thread 0's) that no group takes (grouped).
func lineWho(s PlanStep, grouped bool) int {
	wide := s.N > 8 || s.Kind == StepLinePut && s.Count > 1 || s.Kind == StepLineWait && s.Count>>LineGroupShift > 1
	if wide || grouped {
		return byOther
	}
	return byBlock0
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
	// groupEnd[i]: step i is a member of a line group that ends at step
	// groupEnd[i] (its head included), -1 where none: a member's bytes are
	// the head's to move, cut by lines over the grid, and a wide drain ends
	// with every block meeting (sync_plan.cu).
	groupEnd := lineGroups(steps)
	// A line put is a signal (its peer's drain stands for a wait): its
	// lines go once every block got there, as a signal of block 0's goes
	// once every block arrived. A put cut over the grid sends some of its
	// lines from each block, maybe none from some, so a grid step comes
	// before it (before a group's head).
	for i, s := range steps {
		if s.Kind == StepLinePut && lineWho(s, false) == byOther && (groupEnd[i] < 0 || i == 0 || groupEnd[i-1] != groupEnd[i]) {
			grid[i] = true
		}
	}
	for changed := true; changed; {
		changed = false
		var seen []spreadAccess
		for j := 0; j < 2*len(steps); j++ {
			i := j % len(steps)
			if grid[i] {
				seen = seen[:0]
			}
			acc := accessesFor(steps[i], groupEnd[i] >= 0)
			if !grid[i] && clashes(seen, acc, turn) {
				grid[i], changed = true, true
				seen = seen[:0]
			}
			seen = append(seen, acc...)
			if meetsAfter(steps, i, groupEnd, grid) {
				seen = seen[:0]
			}
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

// meetsAfter reports whether every block of a spread plan meets after
// step i: a wide drain, alone or the last of a group that no grid step
// cuts (sync_plan.cu).
func meetsAfter(steps []PlanStep, i int, groupEnd []int, grid []bool) bool {
	if steps[i].Kind != StepLineWait {
		return false
	}
	if groupEnd[i] < 0 {
		return lineWho(steps[i], false) == byOther
	}
	if groupEnd[i] != i {
		return false
	}
	head := i
	for head > 0 && groupEnd[head-1] == i {
		head--
	}
	for g := head + 1; g <= i; g++ {
		if grid[g] {
			return lineWho(steps[i], false) == byOther
		}
	}
	return true
}

// lineGroups gives, for every step that belongs to a group of line puts
// or drains (groupLines' marks: the head's Count), the index of the
// group's last step, and -1 for every other step.
func lineGroups(steps []PlanStep) []int {
	end := make([]int, len(steps))
	for i := range end {
		end[i] = -1
	}
	for i := 0; i < len(steps); i++ {
		s := steps[i]
		k := 0
		switch {
		case s.Kind == StepLinePut && s.Count > 1:
			k = int(s.Count)
		case s.Kind == StepLineWait && s.Count>>LineGroupShift > 1:
			k = int(s.Count >> LineGroupShift)
		}
		if k < 2 || i+k > len(steps) {
			continue
		}
		for g := i; g < i+k; g++ {
			end[g] = i + k - 1
		}
		i += k - 1
	}
	return end
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
