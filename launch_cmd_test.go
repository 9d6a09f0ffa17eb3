package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/launch"
)

// TestJobEnvChecksFilesWhereWritten checks that the output files are
// checked by the launcher and by rank 0, which write them, and by no
// other rank.
func TestJobEnvChecksFilesWhereWritten(t *testing.T) {
	refuse := errors.New("cannot write")
	for _, c := range []struct {
		rank    string // "": started by no launcher
		checked bool
	}{{"", true}, {"0", true}, {"1", false}} {
		t.Run("rank="+c.rank, func(t *testing.T) {
			if c.rank != "" {
				t.Setenv(launch.EnvRank, c.rank)
				t.Setenv(launch.EnvSize, "2")
				t.Setenv(launch.EnvAddr, "127.0.0.1:29500")
			}
			checked := false
			env, isRank, err := jobEnv(func() error { checked = true; return refuse })
			if checked != c.checked {
				t.Fatalf("files checked: %v, want %v", checked, c.checked)
			}
			if isRank != (c.rank != "") {
				t.Fatalf("isRank %v for rank %q", isRank, c.rank)
			}
			if c.checked && !errors.Is(err, refuse) {
				t.Fatalf("err %v, want the check's", err)
			}
			if !c.checked && (err != nil || env.Rank != 1 || env.Size != 2) {
				t.Fatalf("rank 1: env %+v, err %v", env, err)
			}
		})
	}
}

// TestUnderMPIRunNamesTheCommand checks --vs mpi's refusal outside
// mpirun and its command line, and that an mpirun rank passes silently.
func TestUnderMPIRunNamesTheCommand(t *testing.T) {
	var stderr bytes.Buffer
	if underMPIRun(launch.RankEnv{}, false, 0, "allgather", []string{"-n", "3", "--vs", "mpi"}, &stderr) {
		t.Fatal("outside mpirun: passed")
	}
	want := "luacoll bench allgather: --vs mpi: "
	if got := stderr.String(); !strings.HasPrefix(got, want) || !strings.Contains(got, "mpirun -np 4 ") || !strings.HasSuffix(got, "bench allgather --vs mpi\n") {
		t.Fatalf("refusal %q", got)
	}
	stderr.Reset()
	// luacoll's own rank is not mpirun's: refused as well.
	if underMPIRun(launch.RankEnv{Source: launch.SourceLuacoll}, true, 2, "barrier", nil, &stderr) || stderr.Len() == 0 {
		t.Fatal("luacoll's rank: not refused")
	}
	stderr.Reset()
	if !underMPIRun(launch.RankEnv{Source: launch.SourceOpenMPI}, true, 2, "barrier", nil, &stderr) || stderr.Len() != 0 {
		t.Fatalf("under mpirun: refused (%q)", stderr.String())
	}
}

// TestLaunchRanksRefusesNodes checks that a --nodes the ranks cannot
// fill stops the launch with status 2 and the command's name, before
// anything starts.
func TestLaunchRanksRefusesNodes(t *testing.T) {
	f := rankFlags{n: 2, nodes: 3, device: "host"}
	var stdout, stderr bytes.Buffer
	code := f.launchRanks(context.Background(), launchJob{prog: "bench allgather", defaultN: 2, args: []string{"bench", "allgather"}}, &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if want := "luacoll bench allgather: --nodes 3: want 1..2 (one rank per node at least)\n"; stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
	if f.launchN(5) != 2 || (&rankFlags{}).launchN(5) != 5 {
		t.Fatal("launchN: -n or the default")
	}
}
