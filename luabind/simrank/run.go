package simrank

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/transport"
)

// Options configure Run.
type Options struct {
	// Ranks is how many ranks are simulated, in nodes of PerNode
	// consecutive ranks (Ranks a multiple of PerNode).
	Ranks, PerNode int
	// Src is the script, Name what messages call it, Args its arguments.
	Src  []byte
	Name string
	Args []string
	// Model and Mode are the cost model and replay mode each plan's time
	// is estimated with; ModelName names the model in reports.
	Model     *cost.Model
	ModelName string
	Mode      string
	// Budget bounds each verification's work (0: verify.DefaultBudget
	// scaled by the ranks, past 64).
	Budget int
	// Real are the names of the functions and methods real ranks have
	// ("lc.timer", "b:read"): the ones simulated ranks lack are refused
	// as needing real ranks, any other name as a typo.
	Real []string
	// Stdout gets rank 0's output and the reports; Progress (may be nil)
	// a line every ProgressEvery while a long run goes on.
	Stdout        io.Writer
	Progress      io.Writer
	ProgressEvery time.Duration
	// Ahead, when positive, has a shadow of rank 0 record its lists
	// before it runs, and a second goroutine verify and estimate the
	// plans ahead of it (spec.go), at most Ahead verifications at once
	// (each holds the verifier's memory: 1 overlaps the estimates with
	// the verifications). 0: every plan is verified and estimated as
	// rank 0 makes it, on one goroutine.
	Ahead int
}

// Result is what a run found.
type Result struct {
	// Plans made, verifications asked for with p:verify, those of plans
	// as they were made (a plan's own, where no p:verify covered it), and
	// how many of these found problems.
	Plans, Verifies, Made, Failed int
	// Skipped counts rank 0's p:run calls, which ran nothing.
	Skipped int
	// Ahead counts the verifications rank 0 took from the work done
	// ahead of it (spec.go).
	Ahead   int
	Elapsed time.Duration
	// PeakRSS is the process's peak resident memory (bytes; 0 where the
	// system does not say), HeapPeak the Go heap's largest size seen.
	PeakRSS, HeapPeak uint64
	// Estimates are each plan's estimate on the run's model and layout.
	Estimates []Estimate
}

// Estimate is one plan's predicted replay.
type Estimate struct {
	Plan   int
	Site   string
	Result *cost.Result
}

// world is what the simulated ranks share: the plans, by number, with
// every rank's list, and each window's ledger.
type world struct {
	o       Options
	out     io.Writer
	plans   []*planSlot
	ledgers map[int]*plan.Ledger
	res     Result
	start   time.Time
	// pmu guards last, the time of the last progress line, and running,
	// the verifications under way (progress.go).
	pmu     sync.Mutex
	last    time.Time
	running []*running
	real    map[string]bool
	// main is the script, compiled once (before any rank runs).
	main *lua.FunctionProto
	// env is what rank 0 and its shadow reuse (each goroutine that
	// records the other ranks has its own: recordOthers).
	env rankEnv
	// pending is the plan rank 0 made last, not verified yet (flush).
	pending *planSlot
	// spec is the work ahead of rank 0 (spec.go; nil: none).
	spec *speculation
	// mu guards the plans' slots (their lists, sites and p:verify
	// sources) while the other ranks record on several goroutines.
	mu sync.Mutex
}

// rankEnv is what the ranks that run one after the other on a goroutine
// reuse: the embedded modules, compiled once, and the arrays of the
// recorder of the plan the running rank makes.
type rankEnv struct {
	libs map[string]*lua.FunctionProto
	rec  recorder
}

// Run runs the script for every simulated rank, ranks Ranks-1 down to 1
// on several goroutines (recordOthers), then rank 0, verifying and
// estimating each plan when rank 0 makes it. The error is that of the
// highest rank that failed, as if the ranks ran in turn from the last (a
// Lua error, a plan that failed verification, a rank whose plans do not
// match rank 0's).
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Ranks < 1 || o.PerNode < 1 || o.Ranks%o.PerNode != 0 {
		return nil, fmt.Errorf("simulated ranks: %d ranks do not fill nodes of %d", o.Ranks, o.PerNode)
	}
	if o.Model == nil {
		return nil, fmt.Errorf("simulated ranks: no cost model")
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	w := &world{o: o, out: o.Stdout, ledgers: map[int]*plan.Ledger{}, start: time.Now(), real: map[string]bool{},
		env: rankEnv{libs: map[string]*lua.FunctionProto{}}}
	w.last = w.start
	for _, n := range o.Real {
		w.real[n] = true
	}
	stopHeap := w.watchHeap()
	defer stopHeap()
	defer w.watchVerifications()()
	defer func() { w.spec.close() }()
	if err := w.compile(); err != nil {
		return nil, fmt.Errorf("simulated rank %d: %w", o.Ranks-1, err)
	}
	if err := w.recordOthers(ctx, recordWorkers(o.Ranks)); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simulated ranks: stopped at rank 0: %w", context.Cause(ctx))
	}
	if o.Ranks > 1 && o.Ahead > 0 {
		w.runShadow(ctx)
	}
	if err := w.stopped(ctx, 0, w.runRank(ctx, 0, &w.env)); err != nil {
		return nil, err
	}
	w.progress(func() string {
		return fmt.Sprintf("simulated ranks: %d of %d ran the script", o.Ranks, o.Ranks)
	})
	if err := w.flush(); err != nil {
		return nil, fmt.Errorf("simulated rank 0: %w", err)
	}
	for _, p := range w.plans {
		if !p.done {
			return nil, fmt.Errorf("simulated ranks: rank %d made plan %d (at %s), rank 0 made only %d plans", p.firstRank, p.num, p.site, len(w.plans)-1)
		}
	}
	w.res.Elapsed = time.Since(w.start)
	w.res.PeakRSS = peakRSS()
	return &w.res, nil
}

// runRank runs the script as simulated rank r in a fresh Lua state, with
// env's modules and recorder.
func (w *world) runRank(ctx context.Context, r int, env *rankEnv) error {
	rk := newRank(w, r, env)
	defer rk.close()
	if err := rk.run(ctx); err != nil {
		return fmt.Errorf("simulated rank %d: %w", r, err)
	}
	return nil
}

// stopped is err, rank r's, or where the run's context ended (an
// interrupt) what stopped it there.
func (w *world) stopped(ctx context.Context, r int, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("simulated ranks: stopped at rank %d: %w", r, context.Cause(ctx))
	}
	return err
}

// compile compiles the script once for every rank.
func (w *world) compile() error {
	proto, err := luabind.CompileScript(w.o.Src, w.o.Name)
	if err != nil {
		return err
	}
	w.main = proto
	return nil
}

// recordWorkers is how many goroutines record the ranks other than rank
// 0: one a CPU the process may use, at most recordMost and at most one a
// rank.
func recordWorkers(ranks int) int {
	return max(1, min(runtime.GOMAXPROCS(0), recordMost, ranks-1))
}

// recordMost bounds recordWorkers: each holds a Lua state and its rank's
// lists as they are made.
const recordMost = 8

// recordOthers runs the script as ranks Ranks-1 down to 1 on workers
// goroutines, each taking the highest rank not yet taken. Every rank's
// plans land in their slots (under w.mu); the error is the failure of the
// highest rank that failed, as when they ran one after the other: once a
// rank failed, no rank below it starts and those below it that run are
// stopped, and those above it, all started before it, run to their end.
func (w *world) recordOthers(ctx context.Context, workers int) error {
	n := w.o.Ranks
	var (
		mu      sync.Mutex
		next    = n - 1
		failed  = -1 // the highest rank that failed
		ferr    error
		ran     int
		running = map[int]context.CancelFunc{}
		wg      sync.WaitGroup
	)
	fail := func(r int, err error) { // under mu
		if r <= failed {
			return
		}
		failed, ferr = r, err
		for q, stop := range running {
			if q < r {
				stop()
			}
		}
	}
	take := func() (int, context.Context) {
		mu.Lock()
		defer mu.Unlock()
		if next < 1 || failed >= 0 {
			return -1, nil
		}
		if err := ctx.Err(); err != nil {
			fail(next, fmt.Errorf("simulated ranks: stopped at rank %d: %w", next, context.Cause(ctx)))
			return -1, nil
		}
		r := next
		next--
		rctx, stop := context.WithCancel(ctx)
		running[r] = stop
		return r, rctx
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := &rankEnv{libs: map[string]*lua.FunctionProto{}}
			for r, rctx := take(); r > 0; r, rctx = take() {
				err := w.stopped(ctx, r, w.runRank(rctx, r, env))
				mu.Lock()
				running[r]()
				delete(running, r)
				if err != nil {
					fail(r, err)
				}
				ran++
				done := ran
				w.progress(func() string {
					return fmt.Sprintf("simulated ranks: %d of %d ran the script", done, n)
				})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ferr
}

// watchHeap notes the Go heap's peak every 100 ms until the returned
// function is called.
func (w *world) watchHeap() func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	var peak uint64
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		w.res.HeapPeak = peak
	}
}

// localClass is the class ranks of one node reach each other with under
// model m: nvl where its backend is CUDA, else shm.
func localClass(m *cost.Model) transport.PeerKind {
	if strings.HasPrefix(m.Backend, "cuda") {
		return transport.KindNVL
	}
	return transport.KindSHM
}

// ParseLayout reads "NxM" (N nodes of M ranks, each up to 2^20) and
// returns N and M.
func ParseLayout(s string) (nodes, per int, err error) {
	a, b, ok := strings.Cut(s, "x")
	nodes, err1 := strconv.Atoi(a)
	per, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || nodes < 1 || per < 1 || nodes > 1<<20 || per > 1<<20 {
		return 0, 0, fmt.Errorf("%q: want NODESxRANKS, e.g. 128x8", s)
	}
	return nodes, per, nil
}

// Bytes writes a byte count as KiB, MiB or GiB.
func Bytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}

// peakRSS and currentRSS read the process's peak and current resident
// memory from /proc (0 where there is none).
func peakRSS() uint64    { return procStatus("VmHWM:") }
func currentRSS() uint64 { return procStatus("VmRSS:") }

func procStatus(key string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
