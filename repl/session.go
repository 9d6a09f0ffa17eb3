package repl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/luabind"
)

// Config configures the front end of a session.
type Config struct {
	N       int           // ranks to start
	Nodes   int           // logical nodes they are split into (engine.LaunchConfig.Nodes)
	Timeout time.Duration // the ranks' timeout (bounds startup and goodbye)
	// Exe and Args are the command line of a worker: the launcher runs it
	// once per rank, with EnvControl set.
	Exe  string
	Args []string
	// Stdin gives the chunks; Stdout gets results and notices, Stderr the
	// ranks' own error output and fatal errors.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Terminal selects prompts, line editing, completion and history
	// (when stdin is a terminal); otherwise chunks are read plainly and
	// results printed without prompts or colours.
	Terminal bool
	// Color colours rank prefixes, errors and notices (Terminal only).
	Color bool
	// HistoryFile keeps the line history (Terminal only; "" for none).
	HistoryFile string
	// MPS, when set, gives the ranks a private MPS control daemon for the
	// session (launch.LaunchConfig.MPS).
	MPS *launch.MPSConfig
	// Launch, when set, starts the ranks instead of launch.Launch (the
	// command wraps it to merge a trace once they exited).
	Launch func(context.Context, launch.LaunchConfig) (launch.LaunchResult, error)
	// Before runs on every rank before the first prompt, in order (the
	// command line's -e chunks and -i script).
	Before []Chunk
}

// Chunk is code for the ranks: a chunk as typed at the prompt, or a
// script's source with its arguments (Script).
type Chunk struct {
	Code, Name string
	Script     bool
	Args       []string
}

const (
	// keepRanks is the launcher's grace after a rank fails: the session
	// goes on with the others, so the launcher never kills them itself.
	keepRanks = 100 * 365 * 24 * time.Hour
	// startSlack is added to the timeout for the ranks to start and connect.
	startSlack = 20 * time.Second
	// quitSlack is added to the timeout for the ranks to say goodbye.
	quitSlack = 5 * time.Second
	// mpsStopWait bounds the wait for the launcher to stop the MPS daemon.
	mpsStopWait = 30 * time.Second
	// stopWait is how long ranks get after SIGINT before SIGKILL.
	stopWait = 3 * time.Second
	// statusWait bounds the check of what still works after a death.
	statusWait = abortWait + time.Second
	// completeWait bounds a completion request.
	completeWait = 500 * time.Millisecond
	// hintAfter is how long an interrupt may take before the session
	// says how to force it.
	hintAfter = 2 * time.Second
)

// errPromptInterrupt is Ctrl-C at the prompt: the pending chunk is dropped.
var errPromptInterrupt = errors.New("interrupted at the prompt")

// rankState is the front end's view of one rank.
type rankState struct {
	rank   int
	c      *conn
	pid    int
	device string
	// alive is false once the control connection closed (read by the
	// completer too).
	alive atomic.Bool

	exitCode  int
	exitKnown bool // exitCode came from os.exit
	killed    bool // the session killed it
}

func (rs *rankState) deathReason() string {
	switch {
	case rs.exitKnown:
		return fmt.Sprintf("exit status %d", rs.exitCode)
	case rs.killed:
		return "killed: it did not stop after the interrupt"
	}
	return "its process ended or dropped the connection"
}

// event is a message from a rank, or the end of its connection.
type event struct {
	rank   int
	msg    *message
	closed bool
}

type launchOutcome struct {
	res launch.LaunchResult
	err error
}

// switchWriter forwards to a writer that can change: what the launcher
// and the ranks print goes to the terminal until the line editor exists,
// then through it, above the prompt.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (sw *switchWriter) Write(b []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.w.Write(b)
}

func (sw *switchWriter) set(w io.Writer) {
	sw.mu.Lock()
	sw.w = w
	sw.mu.Unlock()
}

// session is the front end.
type session struct {
	cfg Config
	ctx context.Context
	out io.Writer
	// rankOut and rankErr carry the launcher's and the ranks' output.
	rankOut, rankErr *switchWriter
	ranks            []*rankState
	dir              string
	ln               net.Listener
	src              lineSource
	local            *lua.LState
	reg              *luabind.Registry
	done             chan struct{}
	events           chan event
	// completions receives the ranks' completion answers.
	completions chan *message
	complID     atomic.Uint64
	sigint      chan os.Signal
	// sigquit receives SIGQUIT (Ctrl-\), which the launcher passes on to
	// the ranks: each shows where it is and exits, and the session ends.
	sigquit chan os.Signal
	quitSig bool // SIGQUIT came: the session ends after the chunk

	launchC      chan launchOutcome // nil once received
	launched     *launchOutcome
	cancelLaunch context.CancelFunc

	targets []int // nil: every alive rank
	nextID  uint64
	deaths  []int // ranks that died and are not reported yet
	failed  bool  // a chunk failed or a rank died

	// killedRanks marks the ranks the session killed with a signal, read
	// by the launcher's goroutine (launch.LaunchConfig.KilledByCaller).
	killedRanks []atomic.Bool
}

// Run runs a session and returns the exit status: 1 when the ranks could
// not be started; 143 or 129 when SIGTERM or SIGHUP ended it (as :quit
// does); otherwise 0, or, without a terminal, 1 when a chunk failed or a
// rank died. ctx ending ends the session as :quit does.
func Run(ctx context.Context, cfg Config) int {
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if !cfg.Terminal {
		cfg.Color = false
		cfg.HistoryFile = ""
	}
	// SIGTERM and SIGHUP end the session as :quit does, and the exit
	// status says which (128 + the signal's number, as a shell's).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	termC := make(chan os.Signal, 1)
	signal.Notify(termC, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(termC)
	var termSig atomic.Int32
	go func() {
		select {
		case sig := <-termC:
			termSig.Store(int32(sig.(syscall.Signal)))
			cancel()
		case <-ctx.Done():
		}
	}()
	s := &session{
		cfg: cfg, ctx: ctx, out: cfg.Stdout,
		rankOut: &switchWriter{w: cfg.Stdout}, rankErr: &switchWriter{w: cfg.Stderr},
		done:        make(chan struct{}),
		events:      make(chan event, 256),
		completions: make(chan *message, 4),
		sigint:      make(chan os.Signal, 4),
		sigquit:     make(chan os.Signal, 1),
		launchC:     make(chan launchOutcome, 1),
		reg:         luabind.NewRegistry(),
	}
	signal.Notify(s.sigint, os.Interrupt)
	defer signal.Stop(s.sigint)
	signal.Notify(s.sigquit, syscall.SIGQUIT)
	defer signal.Stop(s.sigquit)
	// A closed output pipe makes writes fail instead of killing the front
	// end before it has stopped the ranks.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	if err := s.start(); err != nil {
		fmt.Fprintf(cfg.Stderr, "luacoll repl: %v\n", err)
		s.stop(false)
		return 1
	}
	s.local = lua.NewState()
	defer s.local.Close()
	src, err := s.newSource()
	if err != nil {
		fmt.Fprintf(cfg.Stderr, "luacoll repl: %v\n", err)
		s.stop(true)
		return 1
	}
	s.src = src
	if cfg.Terminal {
		fmt.Fprintf(s.out, "luacoll repl: %d %s on %s; :help lists the commands, help() the API, Ctrl-D quits.\n",
			cfg.N, plural(cfg.N, "rank", "ranks"), s.ranks[0].device)
	}
	for _, c := range cfg.Before {
		s.run(c)
	}
	s.loop()
	s.src.close()
	s.stop(true)
	if sig := termSig.Load(); sig != 0 {
		return 128 + int(sig)
	}
	if s.quitSig || (s.failed && !cfg.Terminal) {
		return 1
	}
	return 0
}

// start makes the control socket, launches the ranks and waits for each
// to say hello.
func (s *session) start() error {
	if s.cfg.N < 1 {
		return fmt.Errorf("%d ranks: want at least 1", s.cfg.N)
	}
	dir, err := launch.TempDir("repl")
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	s.dir = dir
	sock := filepath.Join(dir, "ctl")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	s.ln = ln

	launchCtx, cancel := context.WithCancel(context.Background())
	s.cancelLaunch = cancel
	lc := launch.LaunchConfig{N: s.cfg.N, Nodes: s.cfg.Nodes, Path: s.cfg.Exe, Args: s.cfg.Args, Prefix: true,
		Stdout: s.rankOut, Stderr: s.rankErr, Grace: keepRanks,
		ExtraEnv: func(int) []string { return []string{EnvControl + "=" + sock} }, MPS: s.cfg.MPS}
	s.killedRanks = make([]atomic.Bool, s.cfg.N)
	lc.KilledByCaller = func(r int) bool { return r < len(s.killedRanks) && s.killedRanks[r].Load() }
	start := launch.Launch
	if s.cfg.Launch != nil {
		start = s.cfg.Launch
	}
	go func() {
		res, err := start(launchCtx, lc)
		s.launchC <- launchOutcome{res: res, err: err}
	}()

	limit := s.cfg.Timeout + startSlack
	hellos := make(chan *rankState)
	go s.accept(hellos, time.Now().Add(limit))
	s.ranks = make([]*rankState, s.cfg.N)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for joined := 0; joined < s.cfg.N; {
		select {
		case rs := <-hellos:
			if s.ranks[rs.rank] != nil {
				_ = rs.c.close()
				continue
			}
			s.ranks[rs.rank] = rs
			joined++
		case o := <-s.launchC:
			s.launchC, s.launched = nil, &o
			if o.err != nil {
				return fmt.Errorf("starting the ranks: %w", o.err)
			}
			return fmt.Errorf("the ranks exited before the session started (exit status %d)", o.res.ExitCode)
		case <-s.sigint:
			return errors.New("interrupted while the ranks were starting")
		case <-s.ctx.Done():
			return fmt.Errorf("stopped while the ranks were starting: %w", context.Cause(s.ctx))
		case <-timer.C:
			var missing []int
			for r, rs := range s.ranks {
				if rs == nil {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("%s %s did not start within %v", plural(len(missing), "rank", "ranks"),
				formatRanks(missing), limit)
		}
	}
	_ = s.ln.Close()
	for _, rs := range s.ranks {
		go s.readLoop(rs)
	}
	return nil
}

// accept takes the ranks' connections and their hellos.
func (s *session) accept(hellos chan<- *rankState, deadline time.Time) {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			c := newConn(nc)
			_ = nc.SetReadDeadline(deadline)
			m, err := c.recv()
			_ = nc.SetReadDeadline(time.Time{})
			if err != nil || m.Type != msgHello || m.Rank < 0 || m.Rank >= s.cfg.N {
				_ = c.close()
				return
			}
			rs := &rankState{rank: m.Rank, c: c, pid: m.PID, device: m.Device}
			rs.alive.Store(true)
			select {
			case hellos <- rs:
			case <-s.done:
				_ = c.close()
			}
		}()
	}
}

// readLoop turns a rank's messages into events.
func (s *session) readLoop(rs *rankState) {
	for {
		m, err := rs.c.recv()
		if err != nil {
			s.post(event{rank: rs.rank, closed: true})
			return
		}
		if m.Type == msgCandidates {
			select {
			case s.completions <- m:
			default: // nobody waits for it any more
			}
			continue
		}
		s.post(event{rank: rs.rank, msg: m})
	}
}

func (s *session) post(ev event) {
	select {
	case s.events <- ev:
	case <-s.done:
	}
}

// handle applies an event to the view of the ranks.
func (s *session) handle(ev event) {
	rs := s.ranks[ev.rank]
	switch {
	case ev.closed:
		if rs.alive.Load() {
			rs.alive.Store(false)
			s.deaths = append(s.deaths, ev.rank)
		}
	case ev.msg.Type == msgExit:
		rs.exitCode, rs.exitKnown = ev.msg.ExitCode, true
	}
}

// watch handles events while the session waits for input, until stop is
// closed: a rank's death is announced when it happens, not after the next
// line. Only one goroutine may touch the session meanwhile.
func (s *session) watch(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case ev := <-s.events:
			s.handle(ev)
			s.reportDeaths()
		case o := <-s.launchC:
			s.launchC, s.launched = nil, &o
		}
	}
}

// poll handles the events that have arrived, without waiting.
func (s *session) poll() {
	for {
		select {
		case ev := <-s.events:
			s.handle(ev)
		case o := <-s.launchC:
			s.launchC, s.launched = nil, &o
		default:
			return
		}
	}
}

// loop reads and runs chunks and commands until the input ends or :quit.
func (s *session) loop() {
	for {
		s.poll()
		s.reportDeaths()
		if s.ctx.Err() != nil {
			return
		}
		first, err := s.src.next(s.prompt())
		if errors.Is(err, errPromptInterrupt) {
			continue
		}
		if err != nil {
			return
		}
		trimmed := strings.TrimSpace(first)
		if trimmed == "" {
			continue
		}
		if strings.HasPrefix(trimmed, ":") {
			if s.command(trimmed) {
				return
			}
			continue
		}
		chunk, eof := first, false
		for luabind.Incomplete(chunk) {
			more, err := s.src.next(">> ")
			if errors.Is(err, errPromptInterrupt) {
				chunk = ""
				break
			}
			if err != nil {
				eof = true // run what there is: it reports the syntax error
				break
			}
			chunk += "\n" + more
		}
		if chunk != "" {
			s.run(Chunk{Code: chunk, Name: "stdin"})
		}
		if s.quitSig {
			s.notice("SIGQUIT: each rank showed where it was (its Lua traceback and wait, its Go stacks' file); the session ends")
			return
		}
		if eof {
			s.poll()
			s.reportDeaths()
			return
		}
	}
}

func (s *session) prompt() string {
	if s.targets == nil {
		return "> "
	}
	return "[" + formatRanks(s.targets) + "]> "
}

// alive lists the ranks whose connection is up.
func (s *session) alive() []int {
	var out []int
	for _, rs := range s.ranks {
		if rs.alive.Load() {
			out = append(out, rs.rank)
		}
	}
	return out
}

// runOn lists the alive ranks that chunks run on.
func (s *session) runOn() []int {
	if s.targets == nil {
		return s.alive()
	}
	var out []int
	for _, r := range s.targets {
		if s.ranks[r].alive.Load() {
			out = append(out, r)
		}
	}
	return out
}

// drainSignals forgets Ctrl-Cs that arrived while nothing ran.
func (s *session) drainSignals() {
	for {
		select {
		case <-s.sigint:
		default:
			return
		}
	}
}

// run runs a chunk on the current ranks and shows what they answered. A
// syntax error is shown once, without asking the ranks.
func (s *session) run(c Chunk) {
	s.drainSignals()
	syntax := luabind.ChunkSyntax
	if c.Script {
		syntax = luabind.ScriptSyntax
	}
	if err := syntax(c.Code, c.Name); err != nil {
		s.errorf("%v", err)
		return
	}
	targets := s.runOn()
	if len(targets) == 0 {
		s.errorf("no rank to run on: %s", s.aliveSummary())
		return
	}
	s.nextID++
	id := s.nextID
	subset := ""
	if len(s.targets) > 0 && len(s.targets) < len(s.ranks) {
		subset = fmt.Sprintf("%s %s of 0-%d", plural(len(s.targets), "rank", "ranks"), formatRanks(s.targets), len(s.ranks)-1)
	}
	pending := map[int]bool{}
	for _, r := range targets {
		m := &message{Type: msgEval, ID: id, Code: c.Code, Name: c.Name, Subset: subset, Script: c.Script, Args: c.Args}
		if err := s.ranks[r].c.send(m); err != nil {
			continue // its connection is gone; the read loop reports it
		}
		pending[r] = true
	}
	replies := map[int]reply{}
	interrupts := 0
	ctxDone := s.ctx.Done()
	var killC, hintC <-chan time.Time
	interrupt := func() {
		for r := range pending {
			_ = s.ranks[r].c.send(&message{Type: msgInterrupt, ID: id})
		}
		hintC = time.After(hintAfter)
	}
	for len(pending) > 0 {
		select {
		case ev := <-s.events:
			s.handle(ev)
			if !pending[ev.rank] {
				continue
			}
			switch {
			case ev.closed:
				delete(pending, ev.rank)
			case ev.msg.ID != id:
			case ev.msg.Type == msgResult:
				m := ev.msg
				replies[ev.rank] = reply{rank: ev.rank, output: m.Output, values: m.Values, err: m.Err, stream: m.Stream,
					interrupted: m.Interrupted}
				delete(pending, ev.rank)
			case ev.msg.Type == msgExit:
				// What it printed before os.exit; it stays pending until
				// its connection closes, so its death is reported now.
				replies[ev.rank] = reply{rank: ev.rank, output: ev.msg.Output}
			}
		case <-s.sigint:
			interrupts++
			if interrupts == 1 {
				if s.cfg.Terminal {
					_, _ = io.WriteString(s.out, "\n") // after the terminal's ^C
				}
				interrupt()
			} else {
				s.kill(pending)
			}
		case <-ctxDone:
			ctxDone = nil
			interrupt()
			killC = time.After(stopWait)
		case <-s.sigquit:
			s.quitSig = true
			if s.cfg.Terminal {
				_, _ = io.WriteString(s.out, "\n") // after the terminal's ^\
			}
		case <-killC:
			s.kill(pending)
		case <-hintC:
			var slow []int
			for r := range pending {
				slow = append(slow, r)
			}
			s.notice("waiting for %s %s to stop; Ctrl-C again kills %s", plural(len(slow), "rank", "ranks"),
				formatRanks(slow), plural(len(slow), "it", "them"))
		case o := <-s.launchC:
			s.launchC, s.launched = nil, &o
		}
	}
	var rs []reply
	var stranded []int
	for _, r := range replies {
		rs = append(rs, r)
		if r.err != "" || r.stream != "" {
			s.failed = true
		}
		if r.interrupted && strings.Contains(r.err, "bootstrap") {
			stranded = append(stranded, r.rank)
		}
	}
	s.printGroups(groupReplies(rs))
	if len(stranded) > 0 {
		sort.Ints(stranded)
		s.notice("the interrupt left a collective unfinished on %s %s: collectives are out of step across ranks "+
			"from now on (later ones may pair up wrongly or time out); window puts, signals and waits still work",
			plural(len(stranded), "rank", "ranks"), formatRanks(stranded))
	}
	if s.quitSig {
		s.deaths = nil // each rank said why it ended; the session ends too
		return
	}
	s.reportDeaths()
}
