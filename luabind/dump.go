package luabind

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// StackDump is why a rank's script was stopped by SIGQUIT (Ctrl-\ at the
// launcher): it ends the running wait, whose error then says what the
// rank waited for, and the script's Lua traceback is printed with it. The
// Go runtime's stacks, which name no script line, go to GoStacks.
type StackDump struct {
	Rank int
	// GoStacks is the file holding every goroutine's stack ("" when it
	// could not be written; Err says why).
	GoStacks string
	Err      error
	reported bool // said already (the script had ended)
}

func (d *StackDump) Error() string {
	return "SIGQUIT (where each rank is)"
}

// dumpGrace is how long a rank stopped by SIGQUIT has to show where its
// script was before it exits anyway (stuck in Go, say), pointing at its
// Go stacks.
const dumpGrace = 10 * time.Second

// dumpAbortFirst is how long a wait under way has to fail with its own
// description before the script's context is cancelled too; a rank also
// waits as long before it closes, so that the others, signalled at the
// same time, show their own state rather than its departure.
const dumpAbortFirst = 200 * time.Millisecond

// QuitWatch turns SIGQUIT into a report of where a rank's script (or
// benchmark) is.
type QuitWatch struct {
	mu   sync.Mutex
	d    *StackDump
	done bool // the script has returned
	ch   chan os.Signal
	end  chan struct{}
	// fired is closed when SIGQUIT came.
	fired chan struct{}
}

// WatchQuit starts watching for SIGQUIT. On it the rank writes its Go
// stacks to a file, then fails its waits through abort (a wait under way
// then says what it waited for) and, soon after, stops the script through
// cancel (a chunk running Lua stops at its line). A rank whose script had
// ended says so at once.
func WatchQuit(rank int, job, dir string, abort *transport.Abort, cancel context.CancelCauseFunc, stderr io.Writer) *QuitWatch {
	q := &QuitWatch{ch: make(chan os.Signal, 1), end: make(chan struct{}), fired: make(chan struct{})}
	signal.Notify(q.ch, syscall.SIGQUIT)
	go func() {
		select {
		case <-q.end:
			return
		case <-q.ch:
		}
		d := &StackDump{Rank: rank}
		d.GoStacks, d.Err = goStacksFile(dir, job, rank)
		q.mu.Lock()
		q.d = d
		close(q.fired)
		if q.done {
			d.reported = true
			reportDump(stderr, d, fmt.Errorf("the script had ended: waiting for the other ranks to end theirs"), "")
		}
		q.mu.Unlock()
		abort.Set(d)
		select {
		case <-q.end:
			return
		case <-time.After(dumpAbortFirst):
			cancel(d)
		}
		select {
		case <-q.end:
		case <-time.After(dumpGrace):
			reportDump(stderr, d, fmt.Errorf("still running %v after SIGQUIT; see its Go stacks", dumpGrace), "")
			os.Exit(1)
		}
	}()
	return q
}

// ScriptDone marks the script (or measurement) as returned.
func (q *QuitWatch) ScriptDone() {
	q.mu.Lock()
	q.done = true
	q.mu.Unlock()
}

// Dump is the SIGQUIT report under way, or nil.
func (q *QuitWatch) Dump() *StackDump {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.d
}

// Fired is closed when SIGQUIT has come (Dump is then set): a rank that
// is idle, running nothing that would fail, ends on it.
func (q *QuitWatch) Fired() <-chan struct{} {
	return q.fired
}

// Stop ends the watch.
func (q *QuitWatch) Stop() {
	signal.Stop(q.ch)
	close(q.end)
}

// Report prints, when SIGQUIT stopped the rank, what it was doing (what:
// the error that ended the work, naming the wait; trace: the Lua
// traceback, if any) unless that was said already, waits a moment so that
// the other ranks show their own state first, and returns the dump, which
// the caller closes its Comm with. It returns nil when no SIGQUIT came.
func (q *QuitWatch) Report(w io.Writer, what error, trace string) *StackDump {
	d := q.Dump()
	if d == nil {
		return nil
	}
	if !d.reported {
		reportDump(w, d, what, trace)
	}
	time.Sleep(dumpAbortFirst)
	return d
}

// goStacksFile writes every goroutine's stack to a new file in dir, named
// after the job and rank, and returns its name.
func goStacksFile(dir, job string, rank int) (string, error) {
	if job == "" {
		job = fmt.Sprint(os.Getpid())
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("luacoll-stacks-%s-rank%d.txt", job, rank)))
	if err != nil {
		return "", fmt.Errorf("writing the Go stacks: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return "", fmt.Errorf("writing the Go stacks: %w", err)
	}
	return f.Name(), nil
}

// reportDump prints what a rank stopped by SIGQUIT was doing: the error
// that stopped it (the wait it was in, or the line a running chunk had
// reached), its Lua traceback, and where the Go stacks went.
func reportDump(w io.Writer, d *StackDump, what error, trace string) {
	msg := "stopped outside the script"
	if what != nil {
		msg = what.Error()
	}
	if me := fmt.Sprintf("rank %d: ", d.Rank); !strings.Contains(msg, me) {
		msg = me + msg
	}
	fmt.Fprintf(w, "%s\n", msg)
	if trace = strings.TrimSpace(trace); trace != "" {
		fmt.Fprintf(w, "%s\n", trace)
	}
	switch {
	case d.GoStacks != "":
		fmt.Fprintf(w, "rank %d: Go stacks: %s\n", d.Rank, d.GoStacks)
	case d.Err != nil:
		fmt.Fprintf(w, "rank %d: %v\n", d.Rank, d.Err)
	}
}
