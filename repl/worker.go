package repl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/luabind"
)

// WorkerOptions configure one rank of a REPL session.
type WorkerOptions struct {
	// Comm says how the rank opens its world.
	Comm engine.Options
	CUDA engine.CUDABackend
	// Control is the front end's control socket (the value of EnvControl).
	Control string
	// Stderr receives what goes wrong before the control connection is up.
	Stderr io.Writer
}

// errInterrupted is the cause of a chunk stopped by Ctrl-C.
var errInterrupted = errors.New("interrupted")

const (
	// drainWait bounds each stream sync after an interrupt.
	drainWait = 2 * time.Second
	// abortWait is how long a status request waits for the job's abort
	// flag after a rank died.
	abortWait = 2 * time.Second
	// quitWait is how long a rank's stream may take to drain at the end.
	quitWait = time.Second
	// maxOutput bounds the output one chunk returns from one rank.
	maxOutput = 1 << 20
	// maxCandidates bounds one completion answer.
	maxCandidates = 1000
)

// worker is one rank serving the front end.
type worker struct {
	env  launch.RankEnv
	comm *engine.Comm
	st   *luabind.State
	c    *conn
	out  *capture
	// qw turns SIGQUIT (Ctrl-\ at the front end, which passes it on)
	// into a report of where this rank is.
	qw     *luabind.QuitWatch
	stderr io.Writer

	mu          sync.Mutex
	running     uint64 // id of the chunk being evaluated, 0 when idle
	cancel      context.CancelCauseFunc
	interrupted bool

	// set by os.exit, read after the chunk (same goroutine)
	exiting  bool
	exitCode int
}

// Serve runs one rank of a REPL session until the front end says quit or
// goes away, and returns the process's exit status. ctx ending (the
// launcher's SIGINT) ends it too.
func Serve(ctx context.Context, env launch.RankEnv, o WorkerOptions) int {
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	comm, err := engine.Open(ctx, env, o.Comm, o.CUDA)
	if err != nil {
		return engine.ReportOpenError(o.Stderr, "luacoll repl: ", env, err)
	}
	dialTimeout := o.Comm.Timeout
	if dialTimeout <= 0 {
		dialTimeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: dialTimeout}
	nc, err := d.DialContext(ctx, "unix", o.Control)
	if err != nil {
		err = fmt.Errorf("rank %d: connecting to the repl front end: %w", env.Rank, err)
		fmt.Fprintf(o.Stderr, "luacoll repl: %v\n", err)
		_ = comm.Close(err)
		return 1
	}
	w := &worker{env: env, comm: comm, c: newConn(nc), out: &capture{limit: maxOutput}, stderr: o.Stderr}
	defer w.c.close()
	w.qw = luabind.WatchQuit(env.Rank, env.JobID, env.ReportsDir(), comm.Abort, w.stopChunk, o.Stderr)
	defer w.qw.Stop()
	w.st = luabind.New(comm, w.out)
	defer w.st.Close()
	w.install()
	return w.serve(ctx)
}

// install adapts the Lua state to the session: arg is a table (empty until a script sets it),
// io.write goes where print goes, and os.exit ends this rank through the
// front end rather than behind its back.
func (w *worker) install() {
	L := w.st.L
	L.SetGlobal("arg", L.NewTable()) // a script run with -i or :load sets it

	if iolib, ok := L.GetGlobal("io").(*lua.LTable); ok {
		L.SetField(iolib, "write", L.NewFunction(w.ioWrite))
	}
	if oslib, ok := L.GetGlobal("os").(*lua.LTable); ok {
		L.SetField(oslib, "exit", L.NewFunction(w.osExit))
	}
}

func (w *worker) ioWrite(L *lua.LState) int {
	for i := 1; i <= L.GetTop(); i++ {
		switch v := L.Get(i).(type) {
		case lua.LString, lua.LNumber:
			_, _ = io.WriteString(w.out, v.String())
		default:
			L.ArgError(i, "string expected, got "+v.Type().String())
		}
	}
	return 0
}

func (w *worker) osExit(L *lua.LState) int {
	code := luabind.ExitStatus(L.Get(1))
	w.exiting, w.exitCode = true, code
	L.RaiseError("os.exit(%d)", code)
	return 0
}

func (w *worker) serve(ctx context.Context) int {
	hello := &message{Type: msgHello, Rank: w.env.Rank, PID: os.Getpid(), Job: w.comm.Env.JobID,
		Device: w.comm.Backend.Name()}
	if err := w.c.send(hello); err != nil {
		_ = w.comm.Close(fmt.Errorf("rank %d: %w", w.env.Rank, err))
		return 1
	}
	reqs := make(chan *message, 256)
	go w.readLoop(reqs)
	for {
		select {
		case <-ctx.Done():
			_ = w.comm.Close(fmt.Errorf("rank %d: %w", w.env.Rank, errInterrupted))
			return 130
		case <-w.qw.Fired():
			return w.dumped(fmt.Errorf("rank %d: at the prompt (no chunk running)", w.env.Rank), "")
		case m, ok := <-reqs:
			if !ok {
				_ = w.comm.Close(fmt.Errorf("rank %d: the repl front end went away", w.env.Rank))
				return 1
			}
			switch m.Type {
			case msgEval:
				if trace, err := w.eval(ctx, m); w.qw.Dump() != nil {
					return w.dumped(err, trace)
				}
				if w.exiting {
					return w.exit()
				}
			case msgComplete:
				cands := w.st.Complete(m.Word)
				if len(cands) > maxCandidates {
					cands = cands[:maxCandidates]
				}
				_ = w.c.send(&message{Type: msgCandidates, ID: m.ID, Rank: w.env.Rank, Candidates: cands})
			case msgQuit:
				return w.quit(ctx)
			}
		}
	}
}

// readLoop passes requests to the serving goroutine, except interrupts
// and status requests, which it answers itself while a chunk runs.
func (w *worker) readLoop(reqs chan<- *message) {
	defer close(reqs)
	for {
		m, err := w.c.recv()
		if err != nil {
			return
		}
		switch m.Type {
		case msgInterrupt:
			w.interrupt(m.ID)
		case msgStatus:
			go w.status(m.ID)
		default:
			reqs <- m
		}
	}
}

// interrupt stops chunk id if it is still running: its context ends
// (blocking calls and Lua code stop) and the stream fails its current
// wait and drops what is queued.
func (w *worker) interrupt(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running != id || w.interrupted {
		return
	}
	w.interrupted = true
	w.cancel(errInterrupted)
	w.comm.Rank.Stream.Interrupt(errInterrupted)
}

// status answers whether this rank has seen the job abort, waiting a
// little for the news of a peer's death to arrive.
func (w *worker) status(id uint64) {
	t := time.NewTimer(abortWait)
	defer t.Stop()
	select {
	case <-w.comm.Abort.Done():
	case <-t.C:
	}
	reason := ""
	if err := w.comm.Abort.Err(); err != nil {
		reason = err.Error()
	}
	_ = w.c.send(&message{Type: msgStatus, ID: id, Rank: w.env.Rank, Aborted: reason})
}

// eval runs chunk m and answers it, except when SIGQUIT stopped it: then
// it returns the chunk's error and Lua traceback for the rank's report.
func (w *worker) eval(parent context.Context, m *message) (trace string, _ error) {
	ctx, cancel := context.WithCancelCause(parent)
	w.mu.Lock()
	w.running, w.cancel, w.interrupted = m.ID, cancel, false
	w.mu.Unlock()

	if m.Subset != "" {
		w.comm.Refuse = func(string) error {
			return fmt.Errorf("a collective needs every rank, but this chunk runs on %s only (:all runs chunks on every rank)", m.Subset)
		}
	}
	var values []string
	var err error
	if m.Script {
		values, err = w.st.EvalScript(ctx, m.Code, m.Name, m.Args)
	} else {
		values, err = w.st.Eval(ctx, m.Code, m.Name)
	}
	w.comm.Refuse = nil

	w.mu.Lock()
	interrupted := w.interrupted
	w.running, w.cancel = 0, nil
	w.mu.Unlock()
	cancel(nil)

	if w.qw.Dump() != nil {
		var se *luabind.ScriptError
		if errors.As(err, &se) {
			return se.Trace, err
		}
		return "", err
	}
	reply := &message{Type: msgResult, ID: m.ID, Rank: w.env.Rank, Values: values, Interrupted: interrupted}
	if err != nil && !w.exiting {
		reply.Err = err.Error()
	}
	if interrupted {
		reply.Stream = w.drainStream(parent)
	}
	reply.Output = w.out.take()
	if w.exiting {
		reply.Type, reply.ExitCode, reply.Values, reply.Err = msgExit, w.exitCode, nil, ""
	}
	_ = w.c.send(reply)
	return "", nil
}

// stopChunk ends the running chunk's context with cause (SIGQUIT's
// watch, once the chunk's wait had its moment to fail on its own).
func (w *worker) stopChunk(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel(cause)
	}
}

// dumped ends this rank after SIGQUIT: it prints, on its standard error
// (which the front end shows prefixed with the rank), the error that
// stopped it (the wait it was in) and its Lua traceback, with the file of
// its Go stacks, and closes its Comm.
func (w *worker) dumped(err error, trace string) int {
	d := w.qw.Report(w.stderr, err, trace)
	_ = w.comm.Close(d)
	return 1
}

// drainStream consumes what an interrupt left on the stream and checks
// that it works: "" when it does, else what is wrong.
func (w *worker) drainStream(ctx context.Context) string {
	if w.comm.Abort.Err() != nil {
		return "" // the job is aborted; the session says so
	}
	for i := 0; i < 2; i++ {
		sctx, cancel := context.WithTimeout(ctx, drainWait)
		err := w.comm.Sync(sctx)
		cancel()
		switch {
		case err == nil && i == 1:
			return ""
		case err != nil && errors.Is(err, context.DeadlineExceeded):
			return fmt.Sprintf("stream broken: still busy %v after the interrupt", drainWait)
		case err != nil && i == 1:
			return "stream broken: " + strings.TrimPrefix(err.Error(), fmt.Sprintf("rank %d: ", w.env.Rank))
		}
	}
	return ""
}

// quit ends this rank at the end of the session. Operations still queued
// (a wait nobody synced) are dropped rather than waited for.
func (w *worker) quit(ctx context.Context) int {
	sctx, cancel := context.WithTimeout(ctx, quitWait)
	err := w.comm.Sync(sctx)
	cancel()
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		w.comm.Rank.Stream.Interrupt(errors.New("the session ended"))
		sctx, cancel := context.WithTimeout(ctx, quitWait)
		_ = w.comm.Sync(sctx)
		cancel()
	}
	if err := w.comm.Close(nil); err != nil {
		return 1
	}
	return 0
}

// exit ends this rank after os.exit: the others learn why it left.
func (w *worker) exit() int {
	_ = w.comm.Close(fmt.Errorf("left the session with os.exit(%d)", w.exitCode))
	return w.exitCode
}

// capture collects a chunk's print output, up to limit bytes.
type capture struct {
	mu      sync.Mutex
	buf     strings.Builder
	limit   int
	dropped int
}

// Write keeps p, or what fits of it.
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.buf.Len()
	switch {
	case room <= 0:
		c.dropped += len(p)
	case len(p) > room:
		c.buf.Write(p[:room])
		c.dropped += len(p) - room
	default:
		c.buf.Write(p)
	}
	return len(p), nil
}

// take returns what was written since the last take.
func (c *capture) take() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	if c.dropped > 0 {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += fmt.Sprintf("(%d more bytes of output dropped)\n", c.dropped)
	}
	c.buf.Reset()
	c.dropped = 0
	return s
}
