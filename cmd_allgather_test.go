package main

import (
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/plot"
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
		if f[7] == "0.00" || f[10] == "0.00" {
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
