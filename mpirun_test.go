package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Jobs started by a real mpirun (Open MPI, Debian's openmpi-bin) on this
// host, with no rendezvous variable: the ranks meet at the socket named
// after mpirun's job id.

// mpirun runs `mpirun -np n luacoll args...` with a clean environment and
// TMPDIR set to tmp. It skips the test when mpirun is absent.
func mpirun(t *testing.T, tmp string, n int, args ...string) result {
	t.Helper()
	mpi, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (Debian: apt-get install openmpi-bin); skipping the real Open MPI jobs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// As root mpirun wants --allow-run-as-root; CI machines have 2 cores.
	full := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(n), bin}, args...)
	cmd := exec.CommandContext(ctx, mpi, full...)
	// Each mpirun keeps its own session directory: Open MPI builds it from
	// the host name and the user id, and two jobs started at once race on
	// creating it (mkdir: File exists). Both still share TMPDIR, where the
	// ranks meet.
	session := t.TempDir()
	cmd.Env = append(cleanEnv(), "TMPDIR="+tmp,
		"OMPI_MCA_orte_tmpdir_base="+session, "PRTE_MCA_prte_tmpdir_base="+session)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	r := result{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("mpirun %v: %v", args, err)
	}
	return r
}

// meetingDir is where the jobs of this user meet when TMPDIR is tmp.
func meetingDir(tmp string) string {
	return filepath.Join(tmp, fmt.Sprintf("luacoll-%d", os.Getuid()))
}

// checkNoSockets fails when a meeting socket is left in dir.
func checkNoSockets(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		t.Errorf("left in the meeting directory: %s", filepath.Join(dir, e.Name()))
	}
}

// tagScript checks that every rank of the job got the same tag (its first
// argument) and moves a signal round the ring.
const tagScript = `local lc = require("luacoll")
local tag = arg[1]
local tags = lc.allgather(tag)
for r = 1, lc.size do
  if tags[r] ~= tag then error(("rank %d has tag %s, this rank %s"):format(r - 1, tostring(tags[r]), tag)) end
end
local w = lc.window{ bytes = 64 }
w:signal((lc.rank + 1) % lc.size, 0)
w:wait_signal(0, "==", 1)
w:sync()
w:free()
print(("job %s: rank %d of %d local %d/%d met at %s"):format(tag, lc.rank, lc.size, lc.local_rank, lc.local_size,
  lc.info().rendezvous))`

func TestMpirunRunWithoutAddress(t *testing.T) {
	tmp := t.TempDir()
	before := shmLeftovers(t)
	r := mpirun(t, tmp, 2, "run", writeScript(t, tagScript), "solo")
	if r.code != 0 {
		t.Fatalf("mpirun -np 2 luacoll run: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for rank := range 2 {
		if want := fmt.Sprintf("job solo: rank %d of 2 local %d/2", rank, rank); !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s\nstderr %s", want, r.stdout, r.stderr)
		}
	}
	checkClean(t, before)
	checkNoSockets(t, meetingDir(tmp))
}

// TestMpirunTwoJobsAtOnce: two jobs on one host meet at different points:
// each rank sees only its own job's tag.
func TestMpirunTwoJobsAtOnce(t *testing.T) {
	tmp := t.TempDir()
	script := writeScript(t, tagScript)
	tags := []string{"red", "blue"}
	res := make([]result, len(tags))
	var wg sync.WaitGroup
	for i, tag := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = mpirun(t, tmp, 2, "run", script, tag)
		}()
	}
	wg.Wait()
	met := map[string]string{} // meeting point -> tag
	for i, tag := range tags {
		r := res[i]
		if r.code != 0 {
			t.Errorf("job %s: exit %d\nstdout %s\nstderr %s", tag, r.code, r.stdout, r.stderr)
			continue
		}
		for rank := range 2 {
			m := regexp.MustCompile(fmt.Sprintf(`job %s: rank %d of 2 local \d/2 met at (\S+)`, tag, rank)).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Errorf("job %s: rank %d's line missing in\n%s", tag, rank, r.stdout)
				continue
			}
			if !strings.HasPrefix(m[1], "unix:"+meetingDir(tmp)+"/openmpi-") {
				t.Errorf("job %s met at %s, want a socket in %s", tag, m[1], meetingDir(tmp))
			}
			if other, ok := met[m[1]]; ok && other != tag {
				t.Errorf("jobs %s and %s both met at %s", other, tag, m[1])
			}
			met[m[1]] = tag
		}
	}
	checkNoSockets(t, meetingDir(tmp))
}

func TestMpirunBenchAllgather(t *testing.T) {
	tmp := t.TempDir()
	before := shmLeftovers(t)
	r := mpirun(t, tmp, 4, "bench", "allgather", "-b", "4K", "-e", "64K", "--iters", "5", "-w", "2")
	if r.code != 0 {
		t.Fatalf("mpirun -np 4 luacoll bench allgather: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "host backend, 4 ranks") {
		t.Errorf("no header naming 4 ranks in\n%s", r.stdout)
	}
	rows := tableRows(r.stdout, 7)
	if len(rows) != 3 { // 4K, 16K, 64K
		t.Fatalf("%d rows, want 3:\n%s\nstderr %s", len(rows), r.stdout, r.stderr)
	}
	for _, row := range rows {
		if row[6] != "0" {
			t.Errorf("size %s: %s wrong elements", row[0], row[6])
		}
	}
	checkClean(t, before)
	checkNoSockets(t, meetingDir(tmp))
}
