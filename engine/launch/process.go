package launch

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// launchedRank is one running child.
type launchedRank struct {
	rank      int
	cmd       *exec.Cmd
	start     time.Time
	outputs   []*os.File    // read ends of the rank's stdout and stderr
	pumped    chan struct{} // closed when both outputs are drained
	exited    bool
	killed    bool // the launcher sent it a signal
	sigkilled bool // the launcher sent it SIGKILL
}

type rankExitEvent struct {
	rank  int
	state *os.ProcessState
	err   error
	at    time.Time
}

// startRank starts one child with its output pumped into sink.
func startRank(rank int, cfg LaunchConfig, env []string, extra []*os.File, stdin io.Reader,
	sink *lineSink, exits chan<- rankExitEvent) (*launchedRank, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:       cfg.Path,
		Args:       append([]string{cfg.Path}, cfg.Args...),
		Env:        env,
		Stdin:      stdin,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: extra,
		WaitDelay:  stdinDelay,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // a terminal's Ctrl-C reaches only the launcher
			Pdeathsig: syscall.SIGKILL, // die with the launcher
		},
	}
	lr := &launchedRank{rank: rank, cmd: cmd, outputs: []*os.File{outR, errR}, pumped: make(chan struct{})}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	lr.start = time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); sink.pump(outR, rank, false) }()
	go func() { defer wg.Done(); sink.pump(errR, rank, true) }()
	go func() { wg.Wait(); close(lr.pumped) }()
	go func() {
		err := cmd.Wait()
		exits <- rankExitEvent{rank: rank, state: cmd.ProcessState, err: err, at: time.Now()}
	}()
	return lr, nil
}

// closeOutputs closes the read ends of the rank's output pipes.
func (lr *launchedRank) closeOutputs() {
	for _, f := range lr.outputs {
		_ = f.Close()
	}
}

// killRanks sends sig to the process group of every rank still running.
func killRanks(ranks []*launchedRank, sig syscall.Signal) {
	for _, lr := range ranks {
		if lr.exited || lr.cmd.Process == nil {
			continue
		}
		lr.killed = true
		lr.sigkilled = lr.sigkilled || sig == syscall.SIGKILL
		pid := lr.cmd.Process.Pid
		if err := syscall.Kill(-pid, sig); err != nil {
			_ = lr.cmd.Process.Signal(sig)
		}
	}
}

// killLeftGroups kills what is left in the process groups of ranks that
// exited: what a rank started (os.execute("... &"), io.popen) and did not
// wait for, which would outlive the job and hold its output open. A group
// with nobody left in it is gone, and its number cannot have been given to
// another group meanwhile.
func killLeftGroups(ranks []*launchedRank) {
	for _, lr := range ranks {
		if lr.exited && lr.cmd.Process != nil {
			_ = syscall.Kill(-lr.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// processStopped reports whether pid is stopped (state T: SIGSTOP, or t:
// stopped by a tracer), from /proc/pid/stat.
func processStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	return statStopped(string(b))
}

// statStopped reads the state field of a /proc/pid/stat line ("pid (comm)
// state ..."; comm may hold spaces and parentheses).
func statStopped(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(stat[i+1:])
	return len(f) > 0 && (f[0] == "T" || f[0] == "t")
}

// KilledBy says that rank was ended by sig, which nobody in the job sent:
// "rank 1 was killed by signal 9 (SIGKILL: out of memory? ...)".
func KilledBy(rank int, sig syscall.Signal) string {
	name := unix.SignalName(sig)
	if name == "" {
		name = sig.String()
	}
	msg := fmt.Sprintf("rank %d was killed by signal %d (%s", rank, int(sig), name)
	if sig == syscall.SIGKILL {
		msg += ": out of memory? the kernel's out-of-memory killer sends SIGKILL; see dmesg or journalctl -k"
	}
	return msg + ")"
}

// exitStatus turns a wait result into an exit code (128+signal when killed)
// and the signal.
func exitStatus(state *os.ProcessState, err error) (int, syscall.Signal) {
	if state == nil {
		if err != nil {
			return 1, 0
		}
		return 0, 0
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalExitMin + int(ws.Signal()), ws.Signal()
	}
	return state.ExitCode(), 0
}
