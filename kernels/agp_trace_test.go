package kernels

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestAGPTraceSummary(t *testing.T) {
	raw := make([]byte, AGPTraceBytes)
	put := func(e uint64, at int, v uint64) {
		binary.LittleEndian.PutUint64(raw[(int(e%AGPTraceExecs)*4+at)*8:], v)
	}
	// 5 execs of 10 us each: ready 1 us, 6 us to the done kernel, done
	// 2 us, 1 us to the next exec; exec 3's move takes 4 us longer.
	const count = 5
	for e := uint64(1); e <= count; e++ {
		b := 100_000 + e*10_000
		put(e, 0, b)
		put(e, 1, b+1000)
		put(e, 2, b+7000)
		put(e, 3, b+9000)
	}
	p, err := AGPTraceSummary(raw, count)
	if err != nil {
		t.Fatal(err)
	}
	want := AGPTracePhases{Execs: 4, Ready: 1, Move: 6, Done: 2, Between: 1, Exec: 10,
		Ready90: 1, Move90: 6, Done90: 2, Between90: 1, Exec90: 10, ExecMean: 10, ExecMax: 10}
	if p != want {
		t.Fatalf("got %+v, want %+v", p, want)
	}
	if s := p.String(); !strings.Contains(s, "4 execs") || !strings.Contains(s, "ready 1.00 (1.00) us") {
		t.Errorf("String: %q", s)
	}
	if _, err := AGPTraceSummary(raw[:8], count); err == nil {
		t.Error("short trace accepted")
	}
	if _, err := AGPTraceSummary(make([]byte, AGPTraceBytes), count); err == nil {
		t.Error("empty trace accepted")
	}
	// A wrapped trace: only the latest AGPTraceExecs-1 execs count. One
	// exec in 5 moves its data 20 us slower: the median stays at 8 us, the
	// 90th percentile shows 28.
	b := uint64(1_000_000)
	for e := uint64(1); e <= 3000; e++ {
		move := uint64(8000)
		if e%5 == 0 {
			move += 20_000
		}
		put(e, 0, b)
		put(e, 1, b+500)
		put(e, 2, b+500+move)
		put(e, 3, b+1500+move)
		b += 2000 + move
	}
	if p, err = AGPTraceSummary(raw, 3000); err != nil || p.Execs != AGPTraceExecs-1 || p.Move != 8 || p.Move90 != 28 || p.Exec90 != 30 || p.ExecMax != 30 || p.ExecMean < 13.9 || p.ExecMean > 14.1 {
		t.Fatalf("wrapped: %+v, %v", p, err)
	}
	// 24 more execs of which exec 3010 ran unstamped: its slot still holds
	// exec 1986's stamps, which must not count as a 24-exec-long exec.
	for e := uint64(3001); e <= 3024; e++ {
		if e == 3010 {
			continue
		}
		put(e, 0, b)
		put(e, 1, b+500)
		put(e, 2, b+8500)
		put(e, 3, b+9500)
		b += 10_000
	}
	if p, err = AGPTraceSummary(raw, 3024); err != nil || p.ExecMax > 30 {
		t.Fatalf("stale slot counted: %+v, %v", p, err)
	}
}
