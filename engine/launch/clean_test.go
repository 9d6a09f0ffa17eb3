package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FindLeftovers keeps what a live process uses (a segment it maps or holds
// open, a directory its maker still runs in) and offers the rest;
// RemoveLeftover removes the rest and refuses the kept.
func TestFindLeftovers(t *testing.T) {
	shm, tmp := t.TempDir(), t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(shm, name)
		if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := mk("luacoll-jobA-r0-s1")
	open := mk("luacoll-jobB-r1-s2")
	mapped := mk("luacoll-jobC-r0-s3")
	mk("luacoll-jobD-leftover") // not a segment name: never touched
	mk("other")
	f, err := os.OpenFile(open, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := os.OpenFile(mapped, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(g.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_SHARED)
	g.Close() // only the mapping holds it now
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)

	// Directories: this process's (live), a finished process's, and one
	// with this pid but older than this process (a reused pid).
	mkdir := func(pid int, age time.Duration) string {
		p := filepath.Join(tmp, fmt.Sprintf("luacoll-repl-%d-x%d", pid, age))
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if age > 0 {
			old := time.Now().Add(-age)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	mine := mkdir(os.Getpid(), 0)
	gone := mkdir(cmd.Process.Pid, 0)
	reused := mkdir(os.Getpid(), 1000*time.Hour)
	if err := os.Mkdir(filepath.Join(tmp, "luacoll-repl-test-1"), 0o700); err != nil { // not ours
		t.Fatal(err)
	}

	found, err := FindLeftovers(shm, tmp)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Leftover{}
	for _, l := range found {
		got[l.Path] = l
	}
	want := map[string]string{ // path -> in use, containing
		dead: "", open: fmt.Sprintf("open in process %d", os.Getpid()),
		mapped: fmt.Sprintf("mapped by process %d", os.Getpid()),
		mine:   fmt.Sprintf("process %d, which made it, is running", os.Getpid()), gone: "", reused: "",
	}
	if len(got) != len(want) {
		t.Errorf("found %d leftovers, want %d: %+v", len(got), len(want), found)
	}
	for p, use := range want {
		l, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s not found", p)
		case use == "" && l.InUse != "":
			t.Errorf("%s: in use (%s), want unused", p, l.InUse)
		case use != "" && l.InUse != use:
			t.Errorf("%s: in use %q, want %q", p, l.InUse, use)
		}
	}
	if l := got[dead]; l.Kind != "segment" || l.Job != "jobA" {
		t.Errorf("dead segment: %+v", l)
	}
	for _, l := range found {
		err := RemoveLeftover(l)
		_, serr := os.Stat(l.Path)
		if l.InUse != "" {
			if err == nil || !strings.Contains(err.Error(), "in use") || serr != nil {
				t.Errorf("%s in use: removing it gave %v, and it exists: %v", l.Path, err, serr == nil)
			}
		} else if err != nil || serr == nil {
			t.Errorf("%s unused: removing it gave %v, and it exists: %v", l.Path, err, serr == nil)
		}
	}
}

// The MPS directory of a job whose launcher is gone is removed after its
// daemon is stopped (told to quit through the control program); a live
// launcher's is kept, its daemon running.
func TestCleanStopsALeftoverMPSDaemon(t *testing.T) {
	control, record := writeFakeMPS(t)
	t.Setenv("PATH", filepath.Dir(control)+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_MPS_RECORD", record)
	tmp := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// What startMPS makes, for a launcher that is gone and for this one.
	daemon := func(launcher int) (dir string, pid int) {
		dir, err := os.MkdirTemp(tmp, fmt.Sprintf("luacoll-mps-%d-job-", launcher))
		if err != nil {
			t.Fatal(err)
		}
		pipe, logs := filepath.Join(dir, "mps-pipe"), filepath.Join(dir, "mps-log")
		for _, p := range []string{pipe, logs} {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(control, "-d")
		cmd.Env = append(os.Environ(), EnvMPSPipe+"="+pipe, EnvMPSLog+"="+logs)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fake daemon: %v %s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(logs, "daemon.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		return dir, pid
	}
	deadDir, deadPID := daemon(gone.Process.Pid)
	liveDir, livePID := daemon(os.Getpid())
	found, err := FindLeftovers(t.TempDir(), tmp)
	if err != nil || len(found) != 2 {
		t.Fatalf("found %+v, %v", found, err)
	}
	for _, l := range found {
		if l.Kind != "MPS directory" {
			t.Errorf("%s: kind %q", l.Path, l.Kind)
		}
		if (l.Path == liveDir) != (l.InUse != "") {
			t.Errorf("%s: in use %q", l.Path, l.InUse)
		}
		if l.InUse == "" {
			if err := RemoveLeftover(l); err != nil {
				t.Errorf("removing %s: %v", l.Path, err)
			}
		}
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Errorf("%s left: %v", deadDir, err)
	}
	if syscall.Kill(deadPID, 0) == nil && !zombie(deadPID) {
		t.Errorf("the gone job's daemon %d still runs", deadPID)
	}
	if c := readMPSRecord(t, record); len(c.quit) != 1 || c.quit[0] != filepath.Join(deadDir, "mps-pipe") {
		t.Errorf("quit sent to %v, want the gone job's pipe only", c.quit)
	}
	if _, err := os.Stat(liveDir); err != nil || syscall.Kill(livePID, 0) != nil {
		t.Errorf("the live job's directory (%v) or daemon went", err)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(b), ") Z ")
}
