package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bench allreduce and reduce_scatter: the table's columns, every checked
// element right, for integers and floats, from Lua and as plans; the JSON
// rows carry type and redop (and lua:auto's rows the schedule it ran,
// plans' rows the mode they replayed in), and the plot is written.
func TestBenchReduce(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ coll, algo, typ, op string }{
		{"allreduce", "lua:ring", "f32", "sum"},
		{"allreduce", "lua:auto", "f64", "sum"},
		{"reduce_scatter", "lua:auto", "i32", "max"},
		{"allreduce", "lua:two_shot", "bf16", "max"},
		{"allreduce", "lua:one_shot", "i64", "prod"},
		{"reduce_scatter", "lua:ring", "u32", "sum"},
		{"reduce_scatter", "lua:direct", "f16", "min"},
	} {
		for _, plan := range []bool{false, true} {
			js, svg := filepath.Join(dir, "r.jsonl"), filepath.Join(dir, "r.svg")
			args := []string{"bench", c.coll, "-n", "3", "-b", "1K", "-e", "256K", "-f", "16", "--iters", "5",
				"--algo", c.algo, "--type", c.typ, "--op", c.op, "--json", js, "--plot", svg}
			if plan {
				args = append(args, "--plan")
			}
			r := luacoll(t, nil, args...)
			if r.code != 0 {
				t.Fatalf("%v: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
			}
			// size count type redop time algbw busbw #wrong
			rows := numericRows(tableRows(r.stdout, 8))
			if len(rows) != 3 {
				t.Fatalf("%v: %d rows:\n%s", args, len(rows), r.stdout)
			}
			for _, f := range rows {
				if f[2] != c.typ || f[3] != c.op || f[7] != "0" {
					t.Errorf("%v: row %v", args, f)
				}
			}
			// lua:auto names the schedule each size ran (host: one_shot up
			// to 4 KiB, then two_shot_pull; push up to 8 KiB of input,
			// then direct); the other algos add no column.
			want := map[string][]string{"allreduce": {"one_shot", "two_shot_pull", "two_shot_pull"},
				"reduce_scatter": {"push", "direct", "direct"}}[c.coll]
			// With --plan the mode the size's plans replayed in comes last.
			var got []string
			for _, line := range strings.Split(r.stdout, "\n") {
				f := strings.Fields(line)
				if len(f) < 8 || f[0][0] < '0' || f[0][0] > '9' {
					continue
				}
				if plan {
					if f[len(f)-1] != "host" {
						t.Errorf("%v: row %q: want the mode host last", args, line)
					}
					f = f[:len(f)-1]
				}
				if len(f) == 9 {
					got = append(got, f[8])
				}
			}
			if c.algo != "lua:auto" {
				want = nil
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%v: schedules %v, want %v\n%s", args, got, want, r.stdout)
			}
			data, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			var meta struct {
				Kind, Collective, Type, RedOp string
				Plan                          bool
			}
			if err := json.Unmarshal([]byte(lines[0]), &meta); err != nil || meta.Collective != c.coll || meta.Plan != plan {
				t.Errorf("meta %s: %+v %v", lines[0], meta, err)
			}
			if len(lines) != 4 || !strings.Contains(lines[1], `"redop":"`+c.op+`"`) {
				t.Errorf("JSON rows:\n%s", data)
			}
			if len(want) > 0 && len(lines) == 4 && !strings.Contains(lines[1], `"schedule":"`+want[0]+`"`) {
				t.Errorf("%v: no schedule in the JSON rows:\n%s", args, data)
			}
			if fi, err := os.Stat(svg); err != nil || fi.Size() == 0 {
				t.Errorf("no plot: %v", err)
			}
		}
	}
}

// Sizes below one element a rank are skipped, and named as given: 4 and
// 8 bytes of f32 at 4 ranks (16 bytes a reduce-scatter's unit).
func TestBenchReduceSkipped(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.jsonl")
	r := luacoll(t, nil, "bench", "reduce_scatter", "-n", "4", "-b", "4", "-e", "64", "-f", "2", "--iters", "2", "--json", js)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "[4 8]") {
		t.Errorf("the table does not name the skipped sizes 4 and 8:\n%s", r.stdout)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Skipped []uint64 `json:"skipped_sizes"`
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if err := json.Unmarshal([]byte(first), &meta); err != nil || fmt.Sprint(meta.Skipped) != "[4 8]" {
		t.Errorf("skipped_sizes %v (%v), want [4 8]: %s", meta.Skipped, err, first)
	}
}

// Bad flags are refused before any rank starts, naming the flag.
func TestBenchReduceErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--type", "u8"}, "--type: unknown element type"},
		{[]string{"--op", "avg"}, "--op: unknown reduction op"},
		{[]string{"--algo", "lua:hier"}, "--algo \"lua:hier\": want lua:auto, lua:ring"},
		{[]string{"--vs", "nccl"}, "--vs nccl: NCCL runs on GPUs"},
		{[]string{"--vs", "gloo"}, "unknown baseline"},
		{[]string{"--graph"}, "--graph needs --device cuda"},
		{[]string{"--path", "pcie"}, "--path \"pcie\": want auto, ce or sm"},
		{[]string{"--path", "sm"}, "--path sm needs --device cuda"},
		{[]string{"--plan-mode", "warp"}, "--plan-mode \"warp\": want auto, host, stream, device or graph"},
		{[]string{"--plan-mode", "device"}, "--plan-mode device needs --device cuda (plans on --device host replay in mode host)"},
		{[]string{"--vs", "mpi"}, "Open MPI's mpirun"},
	} {
		args := append([]string{"bench", "allreduce", "-n", "2"}, c.args...)
		r := luacoll(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reduce_scatter", "-n", "2", "--algo", "lua:one_shot"}, "want lua:auto, lua:ring, lua:direct, lua:push"},
		{[]string{"reduce_scatter", "-n", "3", "-b", "10", "-e", "10", "--type", "f64"}, "-b 10 -e 10 -f 4: every size is below 24 bytes (one f64 a rank at -n 3)"},
		{[]string{"allreduce", "-b", "1", "-e", "4", "--type", "f64"}, "-b 1 -e 4 -f 4: every size is below 8 bytes (one f64)"},
		{[]string{"reduce_scatter", "-n", "4", "-b", "4", "-e", "20", "-f", "8"}, "-b 4 -e 20 -f 8: every size is below 16 bytes (one f32 a rank at -n 4)"},
		{[]string{"allreduce", "-n", "1", "--plan"}, "--plan with -n 1: on one rank the schedules have nothing to send or reduce"},
	} {
		r := luacoll(t, nil, append([]string{"bench"}, c.args...)...)
		// Refused once, before any rank starts.
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want %q once", c.args, r.code, r.stderr, c.want)
		}
	}
}

// The schedules across logical nodes: reduce_from of a network peer goes
// through a get into the window's scratch, and every result is exact.
func TestReduceAcrossNodes(t *testing.T) {
	needUCX(t)
	r := luacoll(t, nil, "run", "-n", "4", "--nodes", "2", "tests/reduce.lua")
	if r.code != 0 || !strings.Contains(r.stdout, "reduce: 29 passed, 0 failed") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// Under Open MPI's mpirun the MPI baselines run beside the schedule, on the
// same window, and their results are checked too.
func TestBenchReduceVsMPI(t *testing.T) {
	for _, coll := range []string{"allreduce", "reduce_scatter"} {
		r := mpirun(t, t.TempDir(), 2, "bench", coll, "-b", "1K", "-e", "64K", "-f", "8", "--iters", "5", "--vs", "mpi", "--type", "i32")
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", coll, r.code, r.stdout, r.stderr)
		}
		// size count type redop time algbw busbw #wrong mpi busbw #wrong ratio
		rows := numericRows(tableRows(r.stdout, 12))
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows:\n%s", coll, len(rows), r.stdout)
		}
		for _, f := range rows {
			if f[7] != "0" || f[10] != "0" {
				t.Errorf("%s: wrong elements: %v", coll, f)
			}
		}
	}
}

// numericRows drops the heading of a table (rows whose size is no number).
func numericRows(rows [][]string) [][]string {
	var out [][]string
	for _, f := range rows {
		if f[0] != "" && f[0][0] >= '0' && f[0][0] <= '9' {
			out = append(out, f)
		}
	}
	return out
}
