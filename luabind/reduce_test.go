package luabind

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport/inproc"
)

// TestReduceLocalAndPeer: w:reduce and w:reduce_from write dst op= src,
// read back, for a window source, a buffer source and a peer's window.
func TestReduceLocalAndPeer(t *testing.T) {
	res := runLua(t, 2, `
local lc = require("luacoll")
local w = lc.window{bytes = 4096}
local b = lc.buffer(4096)
b:fill("iota", 1)
w:buffer():fill("iota", 10 + 100 * lc.rank)
lc.sync()
lc.barrier() -- both windows filled before a rank reads the other's
w:reduce(w, 0, b, 0, 64, "u32", "sum")      -- words 0..15: 10+100r+i + 1+i
w:reduce(b, 64, w, 64, 64, "i32", "max")     -- b words 16..31: max(17+i, 26+100r+i)
w:reduce_from(1 - lc.rank, 128, b, 128, 8, "u64", "prod")
lc.sync()
local wb = w:buffer()
assert(wb:get_u32(0) == 11 + 100 * lc.rank, "sum word 0: " .. wb:get_u32(0))
assert(wb:get_u32(60) == 10 + 100 * lc.rank + 15 + 16, "sum word 15")
assert(b:get_u32(64) == 26 + 100 * lc.rank, "max word 16: " .. b:get_u32(64))
lc.log("prod %d %d", b:get_u32(128), b:get_u32(132))
w:free()
`)
	mustAllOK(t, res)
	// b's u64 at byte 128 (words 32, 33 of iota from 1) times the peer's
	// window u64 there (iota from 10+100p), mod 2^64.
	for r := range res {
		p := uint64(1 - r)
		v := (uint64(33) | uint64(34)<<32) * ((42 + 100*p) | (43+100*p)<<32)
		want := fmt.Sprintf("prod %d %d", uint32(v), uint32(v>>32))
		if !strings.Contains(res[r].out, want) {
			t.Fatalf("rank %d: %q lacks %q", r, res[r].out, want)
		}
	}
}

// TestReduceBadInput: each bad argument is refused before anything is
// enqueued, naming it.
func TestReduceBadInput(t *testing.T) {
	cases := []struct{ call, want string }{
		{`w:reduce(w, 0, b, 0, 63, "u32")`, "bad argument 'n'"},
		{`w:reduce(w, 2, b, 0, 64, "u32")`, "bad argument 'dst_off'"},
		{`w:reduce(w, 0, b, 6, 64, "f64")`, "bad argument 'src_off'"},
		{`w:reduce(w, 0, w, 8, 64, "u32")`, "bad argument 'src' (64 bytes at offset 8"},
		{`w:reduce(w, 0, b, 0, 64, "u8")`, "bad argument #6 'type'"},
		{`w:reduce(w, 0, b, 0, 64, "u32", "avg")`, "bad argument #7 'op'"},
		{`w:reduce(w, 4000, b, 0, 200, "u32")`, "bad argument 'n'"},
		{`w:reduce(nil, 0, b, 0, 8)`, "'dst'"},
		{`w:reduce_from(9, 0, b, 0, 8)`, "bad argument 'peer'"},
		{`w:reduce_from(0, 4090, b, 0, 8)`, "bad argument 'n'"},
		{`w:reduce_from(0, 2, b, 0, 8, "f32")`, "bad argument 'src_off'"},
		{`w:reduce_from(lc.rank, 0, w, 4, 8, "u32")`, "bad argument 'dst'"},
	}
	var code strings.Builder
	code.WriteString("local lc = require('luacoll')\nlocal w = lc.window{bytes = 4096}\nlocal b = lc.buffer(4096)\nw:buffer():fill('const', 7)\n")
	for _, c := range cases {
		fmt.Fprintf(&code, "do local ok, err = pcall(function() %s end); assert(not ok); print(err) end\n", c.call)
	}
	// Nothing was enqueued: the window still holds its fill.
	code.WriteString("lc.sync(); assert(w:buffer():read(0, 4096) == string.rep(string.char(7), 4096), 'data changed')\n")
	res := runLua(t, 1, code.String())
	mustAllOK(t, res)
	lines := strings.Split(strings.TrimSpace(res[0].out), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines for %d cases:\n%s", len(lines), len(cases), res[0].out)
	}
	for i, c := range cases {
		if !strings.Contains(lines[i], c.want) {
			t.Errorf("%s: %q lacks %q", c.call, lines[i], c.want)
		}
	}
}

// TestReduceScheduleBadArgs: the shipped schedules refuse a bad n,
// opts.type or opts.op, naming it and the script's line, before they
// signal anyone: a correct call after the refused ones still meets its
// peers and sums right.
func TestReduceScheduleBadArgs(t *testing.T) {
	cases := []struct{ call, want string }{
		{`rs.ring(w, 64, {type = "f8"})`, "reduce_scatter.ring: bad argument 'opts.type' (unknown element type \"f8\""},
		{`rs.direct(w, 6)`, "reduce_scatter.direct: bad argument 'n' (6 bytes is not a whole number of 4-byte f32 elements)"},
		{`rs.push(w, 64, {op = "avg"})`, "reduce_scatter.push: bad argument 'opts.op'"},
		{`rs.auto(w, 1.5)`, "reduce_scatter.auto: bad argument 'n' (1.5:"},
		{`rs.ring(w, 1/0)`, "reduce_scatter.ring: bad argument 'n' ("},
		{`ar.one_shot(w, 64, {op = "avg"})`, "all_reduce.one_shot: bad argument 'opts.op'"},
		{`ar.ring(w, 64, {type = "f8"})`, "all_reduce.ring: bad argument 'opts.type'"},
		{`ar.two_shot_pull(w, 6)`, "all_reduce.two_shot_pull: bad argument 'n'"},
		{`ar.auto(w, -8)`, "all_reduce.auto: bad argument 'n' (-8:"},
		{`ar.one_shot(w, 64, {half = 100})`, "bad argument 'opts.half' (100 bytes: the staging halves need 128 each"},
		{`rs.push(w, 64, {half = 127})`, "bad argument 'opts.half' (127 bytes"},
	}
	var code strings.Builder
	code.WriteString("local lc = require('luacoll')\nlocal rs, ar = require('reduce_scatter'), require('all_reduce')\nlocal w = lc.window{bytes = 65536}\n")
	for _, c := range cases {
		fmt.Fprintf(&code, "do local ok, err = pcall(function() %s end); assert(not ok); print(err) end\n", c.call)
	}
	code.WriteString("local b = w:buffer(); for i = 0, 31 do b:set_u32(i * 4, lc.rank + 1) end\nlc.barrier()\n" +
		"rs.ring(w, 64, {type = 'u32'}); w:sync()\nprint('sum', b:get_u32(lc.rank * 64))\n")
	res := runLua(t, 2, code.String())
	mustAllOK(t, res)
	for r := range res {
		lines := strings.Split(strings.TrimSpace(res[r].out), "\n")
		if len(lines) != len(cases)+1 {
			t.Fatalf("rank %d: %d lines for %d cases:\n%s", r, len(lines), len(cases), res[r].out)
		}
		for i, c := range cases {
			want := fmt.Sprintf("test.lua:%d: rank %d: %s", 4+i, r, c.want)
			if !strings.Contains(lines[i], want) {
				t.Errorf("rank %d: %s: %q lacks %q", r, c.call, lines[i], want)
			}
		}
		if lines[len(cases)] != "sum\t3" {
			t.Errorf("rank %d: the correct call after them: %q, want sum 3", r, lines[len(cases)])
		}
	}
}

// TestReduceScript runs tests/reduce.lua: every schedule, from Lua and as
// plans run in turn, with exact results on integer data.
func TestReduceScript(t *testing.T) {
	src, name, err := LoadScript("tests/reduce.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 3, 4} {
		res := runLuaWith(t, n, string(src), name, 10*time.Second)
		mustAllOK(t, res)
		if want := "reduce: 29 passed, 0 failed"; !strings.Contains(res[0].out, want) {
			t.Fatalf("n=%d: rank 0 output lacks %q:\n%s", n, want, res[0].out)
		}
	}
}

// luaBytes is p as a Lua string literal (decimal escapes).
func luaBytes(p []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range p {
		fmt.Fprintf(&b, "\\%d", c)
	}
	b.WriteByte('"')
	return b.String()
}

// floatInputs returns each rank's count elements of t: values of mixed
// magnitude and sign, so that the order of a sum shows in its bits.
func floatInputs(ranks, count int, t kernels.DType) [][]byte {
	rng := rand.New(rand.NewPCG(uint64(t), 7))
	out := make([][]byte, ranks)
	for r := range out {
		p := make([]byte, count*int(t.Size()))
		for i := 0; i < count; i++ {
			v := float32((rng.Float64()*2 - 1) * math.Pow(2, float64(rng.IntN(20)-10)))
			if t == kernels.BF16 {
				binary.LittleEndian.PutUint16(p[2*i:], kernels.F32ToBF16(v))
			} else {
				binary.LittleEndian.PutUint32(p[4*i:], math.Float32bits(v))
			}
		}
		out[r] = p
	}
	return out
}

// ringReference is the all-reduce ring's result: chunk c (reduce_scatter.even
// of the elements) reduced starting at rank c+1, each later rank's own data
// as the destination and the partial as the source, ending at rank c.
func ringReference(in [][]byte, t kernels.DType) []byte {
	size, esz := len(in), int(t.Size())
	elems := len(in[0]) / esz
	base, rem := elems/size, elems%size
	out := make([]byte, len(in[0]))
	for c := 0; c < size; c++ {
		off := (c*base + min(c, rem)) * esz
		n := base * esz
		if c < rem {
			n += esz
		}
		acc := append([]byte(nil), in[(c+1)%size][off:off+n]...)
		for k := 2; k <= size; k++ {
			own := append([]byte(nil), in[(c+k)%size][off:off+n]...)
			kernels.ReduceBytes(own, acc, t, kernels.Sum)
			acc = own
		}
		copy(out[off:], acc)
	}
	return out
}

// TestReduceDeterministic: the all-reduce schedules give every rank the
// same bits, the same in a second run, for f32 and bf16 sums; the ring's
// equal the reference in its documented order, and one_shot's (ranks 0..N-1
// in order) those of one_shot_pull.
func TestReduceDeterministic(t *testing.T) {
	const count = 3001 // elements: uneven chunks
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		for _, ranks := range []int{2, 3, 4} {
			in := floatInputs(ranks, count, dt)
			nb := count * int(dt.Size())
			var code strings.Builder
			code.WriteString("local lc = require('luacoll')\nlocal ar = require('all_reduce')\nlocal inputs = {")
			for _, p := range in {
				code.WriteString(luaBytes(p) + ",\n")
			}
			fmt.Fprintf(&code, `}
local n = %d
local w = lc.window{bytes = 2 * n + (2 * lc.size + 1) * n + 4096}
RESULTS = {}
for _, alg in ipairs({"ring", "two_shot", "ring", "two_shot", "one_shot", "one_shot", "two_shot_pull", "one_shot_pull"}) do
  w:buffer():write(0, inputs[lc.rank + 1])
  ar[alg](w, n, {type = %q, scratch = 2 * n})
  lc.sync()
  RESULTS[#RESULTS + 1] = w:buffer():read(0, n)
end
`, nb, dt.String())
			var mu sync.Mutex
			got := make([][]string, ranks)
			runLuaRanks(t, ranks, code.String(), "det.lua", 10*time.Second, func(r int, s *State) {
				tb, ok := s.L.GetGlobal("RESULTS").(*lua.LTable)
				if !ok {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i := 1; i <= tb.Len(); i++ {
					got[r] = append(got[r], string(tb.RawGetInt(i).(lua.LString)))
				}
			})
			want := ringReference(in, dt)
			for r := 0; r < ranks; r++ {
				if len(got[r]) != 8 {
					t.Fatalf("%s, %d ranks: rank %d has %d results", dt, ranks, r, len(got[r]))
				}
				if !bytes.Equal([]byte(got[r][0]), want) {
					t.Errorf("%s, %d ranks: rank %d's ring result differs from the reference order", dt, ranks, r)
				}
				for i, g := range got[r] {
					if g != got[0][i] {
						t.Errorf("%s, %d ranks: run %d: rank %d's bits differ from rank 0's", dt, ranks, i, r)
					}
				}
				if got[r][2] != got[r][0] || got[r][3] != got[r][1] || got[r][5] != got[r][4] || got[r][7] != got[r][4] {
					t.Errorf("%s, %d ranks: rank %d: a second run gave other bits", dt, ranks, r)
				}
			}
		}
	}
}

// FuzzReduceArgs feeds arbitrary offsets, lengths, types and ops to the
// reductions: each call either runs or raises a Lua error (never a panic),
// and a reduction that was refused changed nothing.
func FuzzReduceArgs(f *testing.F) {
	f.Add(false, 0.0, 0.0, 64.0, "f32", "sum")
	f.Add(true, 4.0, 8.0, 8.0, "bf16", "max")
	f.Add(false, 2.0, 1.0, 6.0, "i64", "prod")
	f.Add(true, -1.0, 1e300, 0.5, "u8", "avg")
	g := inproc.NewGroup(1)
	comm, err := enginetest.OpenInProc(context.Background(), g, 0, enginetest.JobID("fr"), engine.Options{Timeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	var out bytes.Buffer
	s := New(comm, &out)
	if err := s.DoString(`lc = require("luacoll"); w = lc.window{ bytes = 256 }; b = lc.buffer(64); b:fill("iota", 1)
		w:buffer():fill("iota", 100); ref = lc.buffer(256)`, "setup"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, fromPeer bool, a, b, c float64, typ, op string) {
		call := fmt.Sprintf("w:reduce(w, %v, b, %v, %v, %q, %q)", a, b, c, typ, op)
		if fromPeer {
			call = fmt.Sprintf("w:reduce_from(0, %v, b, %v, %v, %q, %q)", a, b, c, typ, op)
		}
		code := `ref:fill("const", 0) w:get(0, 0, ref, 0, 256) b2 = b:read(0, 64)
			local ok = pcall(function() ` + call + ` end)
			w:sync()
			if not ok then
				assert(w:buffer():equal(ref, 0, 0, 256) and b:read(0, 64) == b2, "a refused reduction changed data")
			end`
		if err := s.DoString(code, "fuzz"); err != nil {
			t.Fatalf("%s: %v", call, err)
		}
	})
}
