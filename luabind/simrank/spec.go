package simrank

import (
	"context"
	"reflect"
	"slices"
	"sync"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/engine/plan/verify"
)

// Verifying ahead of rank 0.
//
// Rank 0 runs last, and each plan it makes is verified and estimated
// while it waits: one plan after the other, on one CPU. Before it runs, a
// shadow of it (the same script as rank 0, with no output and no io or os
// library) records its lists. With them every plan's lists are known, and
// a second goroutine verifies and estimates the plans ahead of rank 0
// (verifications first), with the options the shadow's p:verify calls gave. Rank 0 takes
// such a result only where its own lists, after the window's ledger, and
// its options are the shadow's (Verify and Estimate are functions of
// them: the same lists and options give the same report); else it
// verifies and estimates as before. Whichever goroutine comes to a task
// first runs it, the other waits for it: at most two run at once, and
// what rank 0 prints and returns is what it would have been without.

// shadowRec is what the shadow of rank 0 recorded.
type shadowRec struct {
	lists []plan.List       // its list of each plan it made
	opts  []*verify.Options // each plan's first verification (nil: not known)
	// pending is the plan it made last and has not verified (0: none):
	// rank 0 would verify it at its next plan, its p:free or the end.
	pending int
}

// verified notes that plan k's first verification, if it has had none,
// has options o (nil: one the shadow cannot tell).
func (s *shadowRec) verified(k int, o *verify.Options) {
	if s.pending == k {
		s.opts[k-1] = o
		s.pending = 0
	}
}

// flushOptions are the options of the verification rank 0 makes of a
// plan that it did not verify with p:verify.
func (w *world) flushOptions() verify.Options { return verify.Options{Budget: w.budget()} }

// task is a verification or estimate of one plan.
type task struct {
	state  int  // taskPending, taskRunning, taskDone (under speculation.mu)
	verify bool // a verification (else an estimate)
	done   chan struct{}
	run    func(t *task)
	rep    *verify.Report
	est    *cost.Result
	err    error
}

const (
	taskPending = iota
	taskRunning
	taskDone
)

// speculation is the work on the shadow's plans.
type speculation struct {
	mu    sync.Mutex
	lists [][]plan.List // every rank's lists of plan k+1, after the ledger
	opts  []*verify.Options
	tasks []*task // plan k+1's estimate at 2k, its verification at 2k+1 (nil: none)
	// valid is how many plans (from the first) may still be taken: a plan
	// of rank 0 unlike the shadow's ends it there. matched says rank 0's
	// lists of a plan were found to be the shadow's.
	valid    int
	matched  []bool
	from     int // tasks before it are taken
	stop     bool
	finished chan struct{}
	// most is how many verifications may run at once (Options.Ahead),
	// verifying how many do; ended is signalled when one ends.
	most, verifying int
	ended           *sync.Cond
}

// runShadow runs the shadow of rank 0 and starts the work ahead of it.
// A shadow that fails is passed over: what it recorded before is used.
func (w *world) runShadow(ctx context.Context) {
	rk := newRank(w, 0, &w.env)
	rk.shadow = &shadowRec{}
	rk.L.SetGlobal("io", lua.LNil)
	rk.L.SetGlobal("os", lua.LNil)
	err := rk.run(ctx)
	rk.close()
	sh := rk.shadow
	if err == nil && sh.pending != 0 {
		o := w.flushOptions()
		sh.verified(sh.pending, &o)
	}
	w.spec = w.speculate(sh)
}

// speculate makes each plan's lists as rank 0's completing it would make
// them, with the shadow's list as rank 0's, and starts the goroutine that
// works through their tasks.
func (w *world) speculate(sh *shadowRec) *speculation {
	sp := &speculation{finished: make(chan struct{}), most: w.o.Ahead}
	sp.ended = sync.NewCond(&sp.mu)
	ledgers := map[int]*plan.Ledger{}
	for k, own := range sh.lists {
		if k >= len(w.plans) {
			break
		}
		slot := w.plans[k]
		lists := slices.Clone(slot.lists)
		lists[0] = own
		ok := true
		for q, made := range slot.made {
			if (q > 0 && !made) || lists[q].Window != own.Window {
				ok = false
			}
		}
		if !ok {
			break
		}
		led := ledgers[own.Window]
		if led == nil {
			led = &plan.Ledger{}
			ledgers[own.Window] = led
		}
		led.Record(lists, 0)
		dropZeroBase(lists)
		sp.lists = append(sp.lists, lists)
		sp.opts = append(sp.opts, sh.opts[k])
		sp.tasks = append(sp.tasks, &task{done: make(chan struct{}), run: w.estimateTask(lists)}, nil)
		if o := sh.opts[k]; o != nil {
			sp.tasks[2*k+1] = &task{done: make(chan struct{}), run: w.verifyTask(k+1, lists, *o), verify: true}
		}
	}
	sp.valid = len(sp.lists)
	sp.matched = make([]bool, len(sp.lists))
	go sp.work()
	return sp
}

func (w *world) estimateTask(lists []plan.List) func(t *task) {
	o := w.o
	class := w.classesFor(o.Model, o.PerNode)
	return func(t *task) {
		t.est, t.err = cost.Estimate(o.Model, cost.Input{Lists: lists, Mode: o.Mode, Class: class})
	}
}

func (w *world) verifyTask(num int, lists []plan.List, o verify.Options) func(t *task) {
	return func(t *task) { t.rep = w.runVerify(num, lists, o) }
}

// work runs, in order, the tasks no one has taken, until the plans still
// valid are done or close stops it.
func (sp *speculation) work() {
	defer close(sp.finished)
	for {
		sp.mu.Lock()
		t := sp.next()
		sp.mu.Unlock()
		if t == nil {
			return
		}
		sp.finish(t)
	}
}

// next claims a task no one has taken that may start (nil: none left, or
// stopped), under sp.mu: the first verification while fewer than most
// run, else the first estimate. Verifications go first: they are the long
// tasks, and one started late runs on alone at the end while the other
// CPU has nothing left to do; the estimates fill the gaps.
func (sp *speculation) next() *task {
	if sp.stop {
		return nil
	}
	for ; sp.from < len(sp.tasks) && sp.from/2 < sp.valid; sp.from++ {
		if t := sp.tasks[sp.from]; t != nil && t.state == taskPending {
			break
		}
	}
	var first *task
	for i := sp.from; i < len(sp.tasks) && i/2 < sp.valid; i++ {
		t := sp.tasks[i]
		if t == nil || t.state != taskPending || !sp.may(t) {
			continue
		}
		if t.verify {
			first = t
			break
		}
		if first == nil {
			first = t
		}
	}
	if first != nil {
		sp.claim(first)
	}
	return first
}

// may reports whether t may start now, under sp.mu.
func (sp *speculation) may(t *task) bool { return !t.verify || sp.verifying < sp.most }

// claim marks t running, under sp.mu.
func (sp *speculation) claim(t *task) {
	t.state = taskRunning
	if t.verify {
		sp.verifying++
	}
}

func (sp *speculation) finish(t *task) {
	t.run(t)
	sp.mu.Lock()
	t.state = taskDone
	if t.verify {
		sp.verifying--
	}
	sp.ended.Broadcast()
	sp.mu.Unlock()
	close(t.done)
}

// take returns task t done: run here if no one has started it (once it
// may), else waited for; while the other goroutine runs it, a task no one
// has taken that may start runs here meanwhile.
func (sp *speculation) take(t *task) *task {
	sp.mu.Lock()
	for {
		switch {
		case t.state == taskDone:
			sp.mu.Unlock()
			return t
		case t.state == taskPending && sp.may(t):
			sp.claim(t)
			sp.mu.Unlock()
			sp.finish(t)
			return t
		}
		if next := sp.next(); next != nil {
			sp.mu.Unlock()
			sp.finish(next)
			sp.mu.Lock()
			continue
		}
		sp.ended.Wait() // for t, or for a verification to make room
	}
}

// match checks rank 0's lists of plan k (after the ledger) against the
// shadow's: where they differ, no task of plan k or after is taken.
func (sp *speculation) match(k int, lists []plan.List) bool {
	if sp == nil {
		return false
	}
	sp.mu.Lock()
	valid := k <= sp.valid
	sp.mu.Unlock()
	ok := valid && sameLists(lists, sp.lists[k-1])
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !ok {
		sp.valid = min(sp.valid, k-1)
		return false
	}
	sp.matched[k-1] = true
	return true
}

// estimate returns the task of plan k's estimate made ahead, done, if
// rank 0's lists matched the shadow's (else nil).
func (sp *speculation) estimate(k int) *task {
	if sp == nil || k > len(sp.matched) || !sp.matched[k-1] {
		return nil
	}
	return sp.take(sp.tasks[2*(k-1)])
}

// verification returns plan k's first verification made ahead, if rank
// 0's lists matched the shadow's and o are the options it was made with.
func (sp *speculation) verification(k int, o verify.Options) (*verify.Report, bool) {
	if sp == nil || k > len(sp.matched) || !sp.matched[k-1] || sp.tasks[2*(k-1)+1] == nil || !reflect.DeepEqual(*sp.opts[k-1], o) {
		return nil, false
	}
	return sp.take(sp.tasks[2*(k-1)+1]).rep, true
}

// close stops the goroutine after the task it runs.
func (sp *speculation) close() {
	if sp == nil {
		return
	}
	sp.mu.Lock()
	sp.stop = true
	sp.mu.Unlock()
	<-sp.finished
}

// sameLists reports whether two plans' lists are the same.
func sameLists(a, b []plan.List) bool {
	if len(a) != len(b) {
		return false
	}
	for q := range a {
		x, y := &a[q], &b[q]
		if x.Window != y.Window || !reflect.DeepEqual(x.Shape, y.Shape) || !slices.Equal(x.Base, y.Base) ||
			!slices.Equal(x.Sent, y.Sent) || !slices.Equal(x.Inbox, y.Inbox) || !slices.Equal(x.Replayed, y.Replayed) ||
			len(x.Ops) != len(y.Ops) {
			return false
		}
		if len(x.Ops) > 0 && &x.Ops[0] != &y.Ops[0] && !slices.Equal(x.Ops, y.Ops) {
			return false
		}
	}
	return true
}
