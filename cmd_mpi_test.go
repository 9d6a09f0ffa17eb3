package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// MPI_Allgather beside the built-in all-gather and beside a Lua schedule,
// on the same buffers in the same processes: both checked, both in the
// table and the JSON, with the ratio.
func TestBenchAllgatherVsMPI(t *testing.T) {
	for _, algo := range []string{"auto", "lua:ring"} {
		js := filepath.Join(t.TempDir(), "ag.jsonl")
		r := mpirun(t, t.TempDir(), 2, "bench", "allgather", "--algo", algo, "-b", "1K", "-e", "64K", "-f", "8", "--iters", "10",
			"--vs", "mpi", "--json", js)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", algo, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "mpi(us)") || !strings.Contains(r.stdout, "# baseline: MPI_Allgather, Open MPI") {
			t.Fatalf("%s: no MPI columns:\n%s", algo, r.stdout)
		}
		// size count type time algbw busbw #wrong mpi m.busbw #wrong ratio
		rows := tableRows(r.stdout, 11)
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows:\n%s", algo, len(rows), r.stdout)
		}
		for _, f := range rows {
			if f[6] != "0" || f[9] != "0" {
				t.Errorf("%s: wrong chunks: %v", algo, f)
			}
			// (the ratio column may read 0.00 when a loaded machine
			// stalls the first size; the JSON's ratio is checked below)
			if f[7] == "0.00" {
				t.Errorf("%s: MPI not measured: %v", algo, f)
			}
		}
		data, err := os.ReadFile(js)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		var meta struct {
			MPI string `json:"mpi"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &meta); err != nil || !strings.HasPrefix(meta.MPI, "Open MPI") {
			t.Errorf("%s: meta %q (%v)", algo, lines[0], err)
		}
		for _, l := range lines[1:] {
			var row struct {
				Sec   float64 `json:"mpi_time_s"`
				Ratio float64 `json:"ratio_vs_mpi"`
			}
			if err := json.Unmarshal([]byte(l), &row); err != nil || row.Sec <= 0 || row.Ratio <= 0 {
				t.Errorf("%s: row without the MPI figures: %s (%v)", algo, l, err)
			}
		}
	}
}

// MPI_Barrier beside the window barrier, 3 ranks on however many CPUs.
func TestBenchBarrierVsMPI(t *testing.T) {
	r := mpirun(t, t.TempDir(), 3, "bench", "barrier", "--vs", "mpi", "--iters", "300")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// ranks iters time ratio
	ours, theirs := rowAfter(r.stdout, "host-issued window barrier"), rowAfter(r.stdout, "MPI_Barrier")
	if len(ours) != 4 || ours[0] != "3" || len(theirs) != 4 || theirs[0] != "3" || theirs[1] != "300" {
		t.Fatalf("rows %q, %q:\n%s", ours, theirs, r.stdout)
	}
	us, err1 := strconv.ParseFloat(ours[2], 64)
	them, err2 := strconv.ParseFloat(theirs[2], 64)
	ratio, err3 := strconv.ParseFloat(theirs[3], 64)
	if err1 != nil || err2 != nil || err3 != nil || us <= 0 || them <= 0 {
		t.Fatalf("rows %q, %q", ours, theirs)
	}
	// The ratio is printed with two decimals.
	if want := them / us; ratio < want*0.9-0.01 || ratio > want*1.1+0.01 {
		t.Errorf("ratio %v, want MPI's time over ours = %v", ratio, want)
	}
}

// Not under mpirun, --vs mpi refuses to run and names the command to use.
func TestBenchVsMPINeedsMPIRun(t *testing.T) {
	for _, what := range []string{"allgather", "barrier"} {
		r := luacoll(t, nil, "bench", what, "-n", "4", "--vs", "mpi")
		want := fmt.Sprintf("run:\n  mpirun -np 4 -x LUACOLL_ADDR=127.0.0.1:29500 luacoll bench %s --vs mpi\n", what)
		if r.code != 2 || !strings.Contains(r.stderr, "needs ranks started by Open MPI's mpirun") || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", what, r.code, r.stderr, want)
		}
	}
	r := luacoll(t, nil, "bench", "put", "--vs", "mpi")
	if r.code != 2 || !strings.Contains(r.stderr, "bench put has no such baseline") {
		t.Errorf("put --vs mpi: exit %d, stderr %q", r.code, r.stderr)
	}
}
