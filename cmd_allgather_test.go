package main

import (
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/bench/plot"
)

// A Lua schedule measured beside the built-in all-gather: one table with
// both, the data of both checked, the JSON rows and the plot carry both.
func TestBenchAllgatherVsDirect(t *testing.T) {
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "ag.jsonl"), filepath.Join(dir, "ag.svg")
	r := luacoll(t, nil, "bench", "allgather", "-n", "2", "-b", "1K", "-e", "64K", "-f", "8", "--iters", "10",
		"--algo", "lua:ring", "--vs", "direct", "--json", js, "--plot", svg)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "direct(us)") || !strings.Contains(r.stdout, "baseline: built-in direct all-gather") {
		t.Fatalf("no built-in columns:\n%s", r.stdout)
	}
	// size count type time algbw busbw #wrong direct d.busbw #wrong ratio
	rows := tableRows(r.stdout, 11)
	for _, f := range rows {
		if f[6] != "0" || f[9] != "0" {
			t.Errorf("wrong chunks: %v", f)
		}
		// (the ratio column may read 0.00 when a loaded machine stalls
		// one side; the JSON's ratio is checked below)
		if f[7] == "0.00" {
			t.Errorf("built-in not measured: %v", f)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows:\n%s", len(rows), r.stdout)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d JSON lines:\n%s", len(lines), data)
	}
	for _, l := range lines[1:] {
		var row struct {
			Kind    string  `json:"kind"`
			Size    uint64  `json:"size"`
			Builtin float64 `json:"builtin_time_s"`
			Ratio   float64 `json:"ratio_vs_builtin"`
		}
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if row.Kind != "row" || row.Builtin <= 0 || row.Ratio <= 0 {
			t.Errorf("row without the built-in figures: %s", l)
		}
	}
	plot, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	p := string(plot)
	if n := strings.Count(p, "<polyline"); n != 2 || !strings.Contains(p, "luacoll lua:ring") || !strings.Contains(p, "built-in direct") {
		t.Errorf("plot has %d lines or misses a name:\n%s", n, p)
	}
}

// --plot FILE.png writes the same chart as a PNG image: a line per
// implementation in its colour (engine/plot tests the drawing itself).
// The two-level Lua schedule on 4 ranks (the nodes found through
// w:transport: one here) moves every chunk right, every size.
func TestBenchAllgatherLuaHier(t *testing.T) {
	r := luacoll(t, nil, "bench", "allgather", "-n", "4", "-b", "1K", "-e", "1M", "-f", "32", "--iters", "5", "--algo", "lua:hier")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rows := tableRows(r.stdout, 7)
	if len(rows) != 3 {
		t.Fatalf("%d rows:\n%s", len(rows), r.stdout)
	}
	for _, f := range rows {
		if f[6] != "0" {
			t.Errorf("wrong chunks: %v", f)
		}
	}
}

func TestBenchAllgatherPlotPNG(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ag.png")
	r := luacoll(t, nil, "bench", "allgather", "-n", "2", "-b", "1K", "-e", "64K", "-f", "8", "--iters", "5",
		"--algo", "lua:direct", "--vs", "direct", "--plot", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	fh, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[color.RGBA]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			seen[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	if seen[plot.Blue] < 100 || seen[plot.Green] < 100 || seen[plot.Red] != 0 {
		t.Errorf("pixels: luacoll %d, built-in %d, NCCL %d; want two lines and no NCCL", seen[plot.Blue], seen[plot.Green], seen[plot.Red])
	}
}

func TestBenchAllgatherVsErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--vs", "direct"}, "--vs direct: compares a Lua schedule"},
		{[]string{"--vs", "nccl"}, "--vs nccl: NCCL runs on GPUs: it needs --device cuda"},
		{[]string{"-b", "3", "-e", "5"}, "-b 3 -e 5: every size is below 32 bytes, the smallest all-gather of 2 ranks (16 bytes a rank)"},
		{[]string{"--vs", "nccl,ucx", "--algo", "lua:ring"}, `unknown baseline "ucx"`},
		{[]string{"--vs", "mpi", "--device", "cuda"}, "--vs mpi: MPI_Allgather is measured on the host backend only"},
		// Not under mpirun: the command to use instead.
		{[]string{"--vs", "mpi", "--algo", "lua:ring", "-b", "4K"}, "run:\n  mpirun -np 2 -x LUACOLL_ADDR=127.0.0.1:29500 luacoll bench allgather --vs mpi --algo lua:ring -b 4K\n"},
		{[]string{"--vs", "", "--algo", "lua:ring", "--graph"}, "--graph needs --device cuda"},
		{[]string{"--algo", "lua:direct", "--inplace"}, "--inplace works with the built-in algorithms only"},
		{[]string{"--path", "fast"}, `--path "fast": want ce, sm or auto`},
		{[]string{"--plot", "ag.jpg"}, `--plot "ag.jpg": plots are written as .svg or .png`},
		{[]string{"--plot", "/nonexistent-dir/ag.png"}, `--plot "/nonexistent-dir/ag.png": cannot write there`},
		{[]string{"--json", "/nonexistent-dir/ag.jsonl"}, `--json "/nonexistent-dir/ag.jsonl": cannot write there`},
	} {
		args := append([]string{"bench", "allgather", "-n", "2"}, c.args...)
		r := luacoll(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// In-place execs: each rank's chunk starts in the window, every chunk is
// checked after the timed execs, and the header and JSON say in place.
func TestBenchAllgatherInPlace(t *testing.T) {
	js := filepath.Join(t.TempDir(), "ag.jsonl")
	r := luacoll(t, nil, "bench", "allgather", "-n", "3", "-b", "3000", "-e", "3000000", "-f", "10", "--iters", "5",
		"--inplace", "--json", js)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, ", in place,") {
		t.Fatalf("header does not say in place:\n%s", r.stdout)
	}
	rows := tableRows(r.stdout, 7) // size count type time algbw busbw #wrong
	for _, f := range rows {
		if f[6] != "0" {
			t.Errorf("wrong chunks: %v", f)
		}
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows:\n%s", len(rows), r.stdout)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		InPlace bool     `json:"in_place"`
		CPUs    []string `json:"cpus"`
		CPUBind string   `json:"cpu_bind"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(data), "\n", 2)[0]), &meta); err != nil || !meta.InPlace {
		t.Errorf("meta line does not say in place (%v): %s", err, data)
	}
	if len(meta.CPUs) != 3 || meta.CPUs[0] == "" || meta.CPUBind != "auto" {
		t.Errorf("meta line: cpus %q, cpu_bind %q", meta.CPUs, meta.CPUBind)
	}
}

// Sizes below 16 bytes a rank (the all-gather's smallest chunk) are
// skipped and said so, in the header and the JSON metadata, and no row of
// size 0 is printed; the metadata also says --stress.
func TestBenchAllgatherSkipsTinySizes(t *testing.T) {
	js := filepath.Join(t.TempDir(), "ag.jsonl")
	r := luacoll(t, nil, "bench", "allgather", "-n", "2", "-b", "8", "-e", "64", "-f", "2", "--iters", "3", "--stress", "--json", js)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "# skipped sizes below 32 bytes (16 bytes a rank at least): 8, 16") {
		t.Errorf("no note of the skipped sizes:\n%s", r.stdout)
	}
	rows := tableRows(r.stdout, 7)
	if len(rows) != 2 || rows[0][0] != "32" || rows[1][0] != "64" {
		t.Errorf("rows %v, want sizes 32 and 64:\n%s", rows, r.stdout)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var meta struct {
		Skipped []uint64 `json:"skipped_sizes"`
		Stress  bool     `json:"stress"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &meta); err != nil || len(meta.Skipped) != 2 || !meta.Stress {
		t.Errorf("meta line (%v): %s", err, lines[0])
	}
	if len(lines) != 3 {
		t.Errorf("%d JSON lines, want the meta line and 2 rows:\n%s", len(lines), data)
	}
}

// help bench allgather is that command's help; every flag is listed once
// (-w and -warmup on one line); -n says each command's default.
func TestBenchAllgatherHelp(t *testing.T) {
	r := luacoll(t, nil, "help", "bench", "allgather")
	out := r.stdout + r.stderr
	if r.code != 0 || !strings.Contains(out, "Usage: luacoll bench allgather") {
		t.Fatalf("exit %d:\n%s", r.code, out)
	}
	if n := strings.Count(out, "warmup execs per size"); n != 1 || !strings.Contains(out, "  -w, -warmup int") {
		t.Errorf("-w/-warmup listed %d times:\n%s", n, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "bench", "allgather"}, "number of ranks to start (default 2;"},
		{[]string{"help", "bench", "put"}, "number of ranks to start (default 2;"},
		{[]string{"help", "run"}, "number of ranks to start (default 1;"},
		{[]string{"help", "repl"}, "number of ranks to start (default 1;"},
	} {
		r := luacoll(t, nil, c.args...)
		if out := r.stdout + r.stderr; !strings.Contains(out, c.want) {
			t.Errorf("%v does not say %q:\n%s", c.args, c.want, out)
		}
	}
}
