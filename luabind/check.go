package luabind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/verify"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
	lua "github.com/yuin/gopher-lua"
)

// checkMode is a rank's account of its plans under `luacoll check`.
type checkMode struct {
	plans, failed int
	verifies      int
	// skipped counts the p:run calls not run; asserts lists the
	// assertions that failed after one (their line and message), which
	// check passes over: what they test is what a replay would have left.
	skipped int
	asserts []string
}

// installAssert replaces the script's assert: once a replay was skipped,
// a failing assertion is noted and passes.
func (m *checkMode) installAssert(L *lua.LState) {
	orig := L.GetGlobal("assert")
	L.SetGlobal("assert", L.NewFunction(func(L *lua.LState) int {
		top := L.GetTop()
		if m.skipped == 0 || lua.LVAsBool(L.Get(1)) {
			L.Push(orig)
			for i := 1; i <= top; i++ {
				L.Push(L.Get(i))
			}
			L.Call(top, lua.MultRet)
			return L.GetTop() - top
		}
		msg := "assertion failed!"
		if top >= 2 {
			msg = L.ToStringMeta(L.Get(2)).String()
		}
		m.asserts = append(m.asserts, strings.TrimSuffix(L.Where(1), ":")+": "+msg)
		return top
	}))
}

// skippedLines says which assertions check passed over, for its summary:
// each line once, with how often it failed and its first message.
func (m *checkMode) skippedLines() string {
	if len(m.asserts) == 0 {
		return ""
	}
	count := map[string]int{}
	var order, first []string
	for _, a := range m.asserts {
		site, msg, _ := strings.Cut(a, ": ")
		if count[site] == 0 {
			order, first = append(order, site), append(first, msg)
		}
		count[site]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "luacoll check: skipped %d failed assertions, which test what replays would have left (check runs none), on rank 0:\n", len(m.asserts))
	for i, site := range order {
		fmt.Fprintf(&b, "  %s (%d times; first: %s)\n", site, count[site], first[i])
	}
	return b.String()
}

// note prints (on rank 0) what a verification found and counts it.
func (m *checkMode) note(s *State, r *planRef, coll string, rep *verify.Report) {
	what := "made"
	if coll != "" {
		what = "verified as " + coll
		m.verifies++
	} else {
		m.plans++
	}
	if !rep.OK {
		m.failed++
	}
	if s.rank() != 0 {
		return
	}
	if rep.OK {
		s.writeLines(fmt.Sprintf("check: plan %d (%s), %s: %s", r.num, r.site, what, rep.Summary()))
		return
	}
	lines := []string{fmt.Sprintf("check: plan %d (%s), %s: %s", r.num, r.site, what, rep.Count())}
	for _, p := range rep.Problems {
		lines = append(lines, "  "+p.String())
	}
	if rep.Dropped > 0 {
		lines = append(lines, fmt.Sprintf("  ... and %d more", rep.Dropped))
	}
	s.writeLines(strings.Join(lines, "\n"))
}

// decodeList decodes rank q's plan message. Under luacoll check, where
// nothing replays and rank 0 alone verifies, the other ranks keep only
// their own list and the others' windows: every rank holding every list
// made check's memory grow with the cube of the ranks.
func (s *State) decodeList(q int, d []byte) (plan.List, string, error) {
	if s.holdsList(q) {
		return plan.DecodeList(d)
	}
	w, st, err := plan.DecodeHead(d)
	return plan.List{Window: w}, st, err
}

// holdsList says whether this rank keeps rank q's ops of the plans it
// makes: every rank does, but under luacoll check, where only rank 0
// verifies, the others keep their own and the heads of the rest.
func (s *State) holdsList(q int) bool {
	return s.plans.check == nil || s.rank() == 0 || q == s.rank()
}

// errExited is the cause a rank's context ends with when its script
// calls os.exit under check.
var errExited = errors.New("os.exit")

// CheckOptions configure CheckScript.
type CheckOptions struct {
	Ranks   int
	Script  string
	Args    []string
	Timeout time.Duration // of every wait and collective
	Stdout  io.Writer
	Stderr  io.Writer
}

// CheckScript runs a script on o.Ranks ranks in this process on the host
// backend with every plan verified as it is made (and by p:verify as the
// script asks) and no replay run, and returns the exit status: 0 when the
// script ran and every verification was clean, 1 otherwise (an interrupt,
// ctx's end, included).
func CheckScript(ctx context.Context, o CheckOptions) int {
	src, name, err := LoadScript(o.Script)
	if err != nil {
		fmt.Fprintf(o.Stderr, "luacoll check: %v\n", err)
		return 2
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	n := o.Ranks
	g := inproc.NewGroup(n)
	out := &lockedWriter{w: o.Stdout}
	job := fmt.Sprintf("chk%d", time.Now().UnixNano())
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	aborts := make([]*transport.Abort, n)
	for i := range aborts {
		aborts[i] = transport.NewAbort()
	}
	// The first failing rank stops the others, as the launcher would.
	var once sync.Once
	var first error
	fail := func(r int, err error) {
		once.Do(func() {
			first = err
			why := &bootstrap.RankError{Rank: r, Reason: err.Error()}
			for _, a := range aborts {
				a.Set(why)
			}
			cancel(why)
		})
	}
	// Interrupted: every rank's waits end at once, and the report says
	// why rather than what the first rank was doing.
	defer context.AfterFunc(ctx, func() {
		why := context.Cause(ctx)
		for _, a := range aborts {
			a.Set(why)
		}
	})()
	// A rank that ended (synced first) tells the others, as the hub does
	// under run: their host waits on it alone fail at once.
	ended := func(r int, why string) {
		for j, a := range aborts {
			if j != r {
				a.SetEnded(r, why)
			}
		}
	}
	modes := make([]*checkMode, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			env := launch.RankEnv{Rank: i, Size: n, LocalRank: i, LocalSize: n, JobID: job, Source: "luacoll check"}
			member := g.Member(i)
			comm, err := engine.OpenWith(runCtx, env, engine.Options{Timeout: o.Timeout}, member, aborts[i], nil)
			if err != nil {
				fail(i, err)
				return
			}
			s := New(comm, out)
			// os.exit ends this rank's script, not the check: the rank
			// leaves (0) or fails (any other status), as under run.
			rankCtx, stop := context.WithCancelCause(runCtx)
			defer stop(nil)
			var exited error
			s.Exit = func(code int, where string) {
				if where == "" {
					where = name
				}
				exited = fmt.Errorf("rank %d: exited early with os.exit(%d) at %s", i, code, where)
				if code == 0 {
					exited = nil
					why := fmt.Sprintf("%s at %s", leftEarly, where)
					_ = comm.Leave(why)
					ended(i, why)
				}
				stop(errExited)
			}
			s.Ctx = rankCtx
			modes[i] = &checkMode{}
			s.plans.check = modes[i]
			modes[i].installAssert(s.L)
			err = s.Run(src, name, o.Args)
			if context.Cause(rankCtx) == errExited {
				err = exited
			} else if err == nil {
				// A collective the others call from here on fails
				// naming this rank, as the hub has it under run.
				member.End()
				if err = comm.Sync(runCtx); err == nil {
					ended(i, "its script ended")
				}
			}
			if err != nil {
				fail(i, err)
			}
			_ = comm.Close(err)
			s.Close()
		}(i)
	}
	wg.Wait()
	return checkReport(ctx, o, name, first, modes[0])
}

// checkReport says how a check of script name on o.Ranks ranks ended and
// returns its exit status: interrupted (ctx), a rank's first failure, or
// rank 0's verdicts (m).
func checkReport(ctx context.Context, o CheckOptions, name string, first error, m *checkMode) int {
	if ctx.Err() != nil {
		fmt.Fprintf(o.Stderr, "luacoll check: interrupted (%v)\n", context.Cause(ctx))
		return 1
	}
	if first != nil {
		fmt.Fprintf(o.Stderr, "luacoll check: %v\n", first)
		return 1
	}
	fmt.Fprint(o.Stdout, m.skippedLines())
	if m.failed > 0 {
		fmt.Fprintf(o.Stdout, "luacoll check: %s: %d of %d verifications found problems (%d plans, %d ranks)\n", name, m.failed, m.plans+m.verifies, m.plans, o.Ranks)
		return 1
	}
	fmt.Fprintf(o.Stdout, "luacoll check: %s: %d plans verified at %d ranks, no problems\n", name, m.plans, o.Ranks)
	return 0
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
