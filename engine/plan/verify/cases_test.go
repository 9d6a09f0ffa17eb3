package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/plan"
)

// A verifier case (testdata/*.plan) is every rank's op list in the
// plans' text format, the options, and the problems expected:
//
//	ranks 3
//	window bytes=300 signals=8 counters=8 barriers=4
//	buffers 100                 # sizes of b1, b2, ...
//	collective allgather n=100 src=b1 src_off=0   # or: collective none
//	replays 4
//	calls 6                     # optional: a call ends after op 6 of every list
//	rank 0
//	put peer=0 off=0 src=b1 src_off=0 n=100 @issue.lua:3
//	...
//	expect stand-in rank=0 line=5 "sum of signal 0"
//	expect ok
//
// "forbid KIND ..." needs no problem of those kinds; "expect KIND rank=R line=L "text"" needs a problem of that kind on that
// rank at that line whose message holds the text (rank, line and text
// optional); "expect ok" needs none at all. A case with no ok expects some
// problem.
type verifyCase struct {
	lists  []plan.List
	opt    Options
	expect []expectation
	forbid []string
	ok     bool
}

type expectation struct {
	kind       string
	rank, line int
	text       string
}

func parseCase(text string) (*verifyCase, error) {
	c := &verifyCase{}
	var sh plan.Shape
	rank := -1
	for num, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "#"); i >= 0 && !strings.Contains(line[:i], "\"") {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		bad := func(err error) error { return fmt.Errorf("line %d: %q: %w", num+1, line, err) }
		kv := func(fields []string) map[string]string {
			m := map[string]string{}
			for _, x := range fields {
				k, v, _ := strings.Cut(x, "=")
				m[k] = v
			}
			return m
		}
		atoi := func(s string) int { v, _ := strconv.Atoi(s); return v }
		switch f[0] {
		case "ranks":
			sh.Ranks = atoi(f[1])
			c.lists = make([]plan.List, sh.Ranks)
		case "window":
			m := kv(f[1:])
			b, _ := strconv.ParseUint(m["bytes"], 10, 64)
			sh.Bytes, sh.Signals, sh.Counters, sh.Barriers = b, atoi(m["signals"]), atoi(m["counters"]), atoi(m["barriers"])
			sh.Buffers = []uint64{b}
		case "buffers":
			for _, x := range f[1:] {
				b, _ := strconv.ParseUint(x, 10, 64)
				sh.Buffers = append(sh.Buffers, b)
			}
		case "replays":
			c.opt.Replays = atoi(f[1])
		case "calls":
			// calls E1 E2 ...: every rank's list holds a call ending after
			// op E1, then E2, ..., then the last one (Options.CallEnds).
			var ends []int
			for _, x := range f[1:] {
				ends = append(ends, atoi(x))
			}
			for range c.lists {
				c.opt.CallEnds = append(c.opt.CallEnds, ends)
			}
		case "collective":
			if f[1] == "none" {
				break
			}
			m := kv(f[2:])
			n, _ := strconv.ParseUint(m["n"], 10, 64)
			c.opt.Collective = Collective{Kind: f[1], N: n, Root: atoi(m["root"])}
			if s, ok := m["src"]; ok {
				b, err := plan.ParseBuf(s)
				if err != nil {
					return nil, bad(err)
				}
				off, _ := strconv.ParseUint(m["src_off"], 10, 64)
				for range c.lists {
					c.opt.Collective.Src = append(c.opt.Collective.Src, Source{Buf: b, Off: off})
				}
			}
		case "rank":
			rank = atoi(f[1])
			if rank < 0 || rank >= len(c.lists) {
				return nil, bad(fmt.Errorf("no rank %d", rank))
			}
		case "forbid":
			c.forbid = append(c.forbid, f[1:]...)
		case "expect":
			if f[1] == "ok" {
				c.ok = true
				break
			}
			e := expectation{kind: f[1], rank: -1, line: -1}
			if q := strings.Index(line, "\""); q >= 0 {
				e.text = strings.Trim(line[q:], "\"")
				f = strings.Fields(line[:q])
			}
			m := kv(f[2:])
			if v, ok := m["rank"]; ok {
				e.rank = atoi(v)
			}
			if v, ok := m["line"]; ok {
				e.line = atoi(v)
			}
			c.expect = append(c.expect, e)
		default:
			if rank < 0 {
				return nil, bad(fmt.Errorf("an op before any rank line"))
			}
			o, err := plan.ParseOp(line)
			if err != nil {
				return nil, bad(err)
			}
			c.lists[rank].Ops = append(c.lists[rank].Ops, o)
		}
	}
	for r := range c.lists {
		c.lists[r].Shape = sh
	}
	return c, nil
}

func (e expectation) match(p Problem) bool {
	return p.Kind == e.kind && (e.rank < 0 || p.Rank == e.rank) && (e.line < 0 || p.Site.Line == e.line) && strings.Contains(p.Msg, e.text)
}

// TestVerifyCases runs every case of testdata.
func TestVerifyCases(t *testing.T) {
	files, err := filepath.Glob("testdata/*.plan")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".plan"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseCase(string(b))
			if err != nil {
				t.Fatal(err)
			}
			rep := Verify(c.lists, c.opt)
			var got strings.Builder
			for _, p := range rep.Problems {
				fmt.Fprintf(&got, "\n  %s", p)
			}
			if c.ok && !rep.OK {
				t.Fatalf("want ok, got:%s", got.String())
			}
			if !c.ok && rep.OK {
				t.Fatalf("want problems, got ok")
			}
			for _, p := range rep.Problems {
				for _, k := range c.forbid {
					if p.Kind == k {
						t.Errorf("a %s problem: %s", k, p)
					}
				}
			}
			for _, e := range c.expect {
				found := false
				for _, p := range rep.Problems {
					found = found || e.match(p)
				}
				if !found {
					t.Errorf("no %s problem (rank %d, line %d, %q); got:%s", e.kind, e.rank, e.line, e.text, got.String())
				}
			}
		})
	}
}

// TestVerifyCallEnds: call ends that do not fit the lists are a shape
// problem, named, before anything is simulated.
func TestVerifyCallEnds(t *testing.T) {
	b, err := os.ReadFile("testdata/reduce-two-calls.plan")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCase(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ends [][]int
		want string
	}{
		{[][]int{{6}}, "call ends for 1 ranks, but 2 lists were given"},
		{[][]int{{6}, {3, 6}}, "3 calls in rank 1's list, 2 in rank 0's"},
		{[][]int{{12}, {12}}, "call end 12 of rank 0's list is not inside it"},
		{[][]int{{4, 4}, {4, 6}}, "call end 4 of rank 0's list is not inside it, after the one before"},
	} {
		opt := c.opt
		opt.CallEnds = tc.ends
		rep := Verify(c.lists, opt)
		if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != "shape" || !strings.Contains(rep.Problems[0].Msg, tc.want) {
			t.Errorf("ends %v: want one shape problem %q, got %+v", tc.ends, tc.want, rep.Problems)
		}
	}
}
