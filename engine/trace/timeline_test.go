package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/engine/trace"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

var update = flag.Bool("update", false, "rewrite testdata/traces/timeline.jsonl")

// ev is a decoded trace event.
type ev struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args"`
	ID   *uint64        `json:"id"`
	BP   string         `json:"bp"`
}

func decode(t *testing.T, data []byte) []ev {
	t.Helper()
	var top struct {
		TraceEvents []ev `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	return top.TraceEvents
}

// traced runs body on n in-process ranks with tracing on and returns the
// merged trace, checked.
func traced(t *testing.T, n int, opts engine.Options, body func(r int, c *engine.Comm) error) ([]byte, []error) {
	t.Helper()
	dir := t.TempDir()
	opts.TraceDir = dir
	errs := enginetest.WithComms(t, n, opts, body)
	parts, missing, err := trace.ReadParts(dir, n)
	if err != nil || len(missing) > 0 {
		t.Fatalf("parts: %v, missing %v", err, missing)
	}
	var out bytes.Buffer
	if _, err := trace.Write(&out, parts, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := trace.Check(out.Bytes()); err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	return out.Bytes(), errs
}

// pairBarrier is a pairwise barrier of ranks 0 and 1 (rank 2 sits out).
func pairBarrier(w *window.Window, me int) error {
	if me > 1 {
		return nil
	}
	return w.BarrierPeer(1-me, 0)
}

// The timeline of a fixed sequence of window calls on 3 ranks: it passes
// the schema and ordering check, matches testdata/traces/timeline.jsonl
// (times left out), and its times agree across ranks (clocks aligned): no
// rank leaves a collective before the last one entered it, and no wait
// for a peer's signal ends before the peer began to send it.
func TestTimelineGolden(t *testing.T) {
	const n = 3
	data, errs := traced(t, n, engine.Options{Timeout: 10 * time.Second}, func(i int, c *engine.Comm) error {
		ctx := context.Background()
		o := window.DefaultOptions()
		o.Bytes, o.Signals, o.Counters, o.Barriers = 256, 2, 2, 2
		w, err := c.NewWindow(ctx, "window(test)", o)
		if err != nil {
			return err
		}
		src, err := c.NewBuffer(64)
		if err != nil {
			return err
		}
		right, left := (i+1)%n, (i+n-1)%n
		steps := []error{
			w.PutSignal(window.Transfer{Peer: right, PeerOff: 64, Local: src, N: 64}, &window.Sig{ID: 1, Value: 1}, nil),
			w.WaitSignalFrom(left, 1, transport.CmpGe, 1),
			w.PutSignal(window.Transfer{Peer: left, PeerOff: 128, Local: src, LocalOff: 8, N: 16}, &window.Sig{ID: 0, Value: 5, Op: window.SigSet}, &window.Ctr{ID: 1, Value: 1}),
			w.WaitCounter(left, 1, transport.CmpEq, 1),
			w.SignalAll(window.Sig{ID: 0, Value: 2}),
			w.WaitSignal(0, transport.CmpGe, 5+2*(n-1)),
			w.Barrier(1),
			pairBarrier(w, i),
			w.Get(window.Transfer{Peer: right, PeerOff: 64, Local: src, N: 32}),
			w.ResetCounter(left, 1),
		}
		for k, e := range steps {
			if e != nil {
				return fmt.Errorf("step %d: %w", k, e)
			}
		}
		if err := w.Sync(ctx); err != nil {
			return err
		}
		return c.FreeWindow(ctx, w)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	events := decode(t, data)
	golden(t, events, filepath.Join("..", "..", "testdata", "traces", "timeline.jsonl"))
	checkFlows(t, events, n)

	// Clocks: every rank's alignment was measured.
	for _, e := range events {
		if e.Name == "clock" && e.Args["aligned"] != true {
			t.Errorf("rank %d: clock not aligned: %v", e.PID, e.Args)
		}
	}
	const slack = 1000.0 // us: the alignment's error is within a round trip
	// Collectives: each rank's return is after every rank's entry.
	entered := map[string]float64{}
	for _, e := range events {
		if e.Ph == trace.PhaseInstant && e.TID == trace.TIDHost && e.Args["seq"] != nil {
			key := fmt.Sprint(e.Args["seq"])
			entered[key] = max(entered[key], e.TS-e.Args["waited_us"].(float64))
		}
	}
	for _, e := range events {
		if e.Ph == trace.PhaseInstant && e.Args["seq"] != nil && e.TS < entered[fmt.Sprint(e.Args["seq"])]-slack {
			t.Errorf("rank %d left %s at %.3f us, before the last rank entered it (%.3f us)", e.PID, e.Name, e.TS, entered[fmt.Sprint(e.Args["seq"])])
		}
	}
	// Signals: rank r's wait for its left neighbour's put_signal ends
	// after that put_signal began.
	sent := map[int]float64{}
	for _, e := range events {
		if e.Name == "put_signal" && e.Args["slot"] == "sig 1" {
			sent[int(e.Args["peer"].(float64))] = e.TS
		}
	}
	for _, e := range events {
		if e.Name == "wait_signal_from" {
			if end := e.TS + e.Dur; end < sent[e.PID]-slack {
				t.Errorf("rank %d's wait ended at %.3f us, before rank %v sent at %.3f us", e.PID, end, e.Args["peer"], sent[e.PID])
			}
		}
	}
}

// checkFlows: each rank's wait_signal_from its left neighbour ends one
// flow, which starts at that neighbour's put_signal of sig 1; each end
// lies inside its slice. The set-then-add posts of sig 0 start flows that
// no wait ends (the ranks wait on the sum).
func checkFlows(t *testing.T, events []ev, n int) {
	t.Helper()
	inside := func(f ev, name string) bool {
		for _, e := range events {
			if e.PID == f.PID && e.TID == f.TID && e.Name == name && e.Ph == trace.PhaseComplete && e.TS <= f.TS && f.TS <= e.TS+e.Dur {
				return true
			}
		}
		return false
	}
	starts := map[uint64]ev{}
	for _, e := range events {
		if e.Ph == trace.PhaseFlowStart {
			starts[*e.ID] = e
			if !inside(e, "put_signal") && !inside(e, "signal_all") {
				t.Errorf("rank %d: flow start at %.3f us is in no post's slice", e.PID, e.TS)
			}
		}
	}
	ends := 0
	for _, e := range events {
		if e.Ph != trace.PhaseFlowEnd {
			continue
		}
		ends++
		s, ok := starts[*e.ID]
		if !ok || s.PID != (e.PID+n-1)%n || e.BP != "e" || !inside(e, "wait_signal_from") || !inside(s, "put_signal") {
			t.Errorf("rank %d: flow end %+v, start %+v (found %v)", e.PID, e, s, ok)
		}
	}
	if ends != n || len(starts) != 4*n { // put_signal sig 1, put_signal sig 0, signal_all to 2 peers
		t.Errorf("%d flow ends, %d starts; want %d and %d", ends, len(starts), n, 4*n)
	}
}

// golden compares the events, times left out, track by track, with path.
func golden(t *testing.T, events []ev, path string) {
	t.Helper()
	var lines []string
	type keyed struct {
		pid, tid, i int
		line        string
	}
	var ks []keyed
	for i, e := range events {
		args := map[string]any{}
		for k, v := range e.Args {
			if !strings.HasSuffix(k, "_us") {
				args[k] = v
			}
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		line := map[string]any{"name": e.Name, "ph": e.Ph, "pid": e.PID, "tid": e.TID, "args": args}
		if e.ID != nil {
			line["id"] = *e.ID
		}
		if e.BP != "" {
			line["bp"] = e.BP
		}
		_ = enc.Encode(line)
		ks = append(ks, keyed{e.PID, e.TID, i, strings.TrimSuffix(b.String(), "\n")})
	}
	sort.SliceStable(ks, func(a, b int) bool {
		if ks[a].pid != ks[b].pid {
			return ks[a].pid < ks[b].pid
		}
		return ks[a].tid < ks[b].tid
	})
	for _, k := range ks {
		lines = append(lines, k.line)
	}
	got := strings.Join(lines, "\n") + "\n"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./engine/trace -run %s -update)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("timeline differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// A wait that times out: the rank's trace shows the wait as a failed
// slice, the operations queued behind it as not run, and the error, both
// at the sync that raised it and as the rank's failure; operations after
// that sync are traced as usual; the other rank's trace ends cleanly.
func TestTimelineOfAFailedWait(t *testing.T) {
	// Rank 0 stays until rank 1's wait has timed out: a wait on a rank
	// that ended fails at once instead (it can never hold).
	timedOut := make(chan struct{})
	var once sync.Once
	data, errs := traced(t, 2, engine.Options{Timeout: 10 * time.Second}, func(i int, c *engine.Comm) error {
		if i == 0 {
			defer func() { <-timedOut }()
		} else {
			defer once.Do(func() { close(timedOut) })
		}
		ctx := context.Background()
		o := window.DefaultOptions()
		o.Bytes, o.Timeout = 64, 200*time.Millisecond
		w, err := c.NewWindow(ctx, "window(test)", o)
		if err != nil {
			return err
		}
		if i == 1 {
			_ = w.WaitSignal(3, transport.CmpGe, 42)
			_ = w.Signal(0, window.Sig{ID: 0, Value: 1})
			err := w.Sync(ctx)
			once.Do(func() { close(timedOut) })
			if err == nil {
				return fmt.Errorf("the wait did not time out")
			}
			_ = w.Signal(1, window.Sig{ID: 2, Value: 1})
			if err := w.Sync(ctx); err != nil {
				return err
			}
			return fmt.Errorf("rank 1 gives up")
		}
		return nil
	})
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "gives up") {
		t.Fatalf("rank 1: %v", errs[1])
	}
	var wait *ev
	var syncErr, failure bool
	var signals []ev
	notRun := 0.0
	for _, e := range decode(t, data) {
		switch {
		case e.PID == 1 && e.Name == "wait_signal":
			wait = &e
		case e.PID == 1 && e.Name == "signal":
			signals = append(signals, e)
		case e.PID == 1 && e.Name == "not run":
			notRun = e.Args["operations"].(float64)
		case e.PID == 1 && e.Name == "sync" && e.Args["error"] != nil:
			syncErr = strings.Contains(e.Args["error"].(string), "timed out")
		case e.PID == 1 && e.Name == "error" && e.Args["message"] == "rank 1 gives up":
			failure = true
		case e.PID == 0 && e.Name == "error":
			t.Errorf("rank 0 recorded an error: %v", e.Args)
		}
	}
	if wait == nil || wait.Args["slot"] != "sig 3" || wait.Args["cmp"] != ">=" || wait.Args["value"] != 42.0 ||
		wait.Args["failed"] != true || wait.Dur < 150e3 {
		t.Fatalf("wait slice %+v: want sig 3 >= 42, failed, lasting about the 200 ms timeout", wait)
	}
	// The signal behind the wait never ran; the one after the sync did.
	if notRun != 1 || len(signals) != 1 || signals[0].Args["slot"] != "sig 2" || signals[0].Args["failed"] != nil {
		t.Fatalf("not run %v, signals %+v: want 1 and the sig 2 one after the failed sync", notRun, signals)
	}
	if !syncErr || !failure {
		t.Fatalf("sync error recorded %v, failure recorded %v", syncErr, failure)
	}
}

// Ranks connected through a real bootstrap read rank 0's clock: sharing
// one process clock, they agree on job time 0 within their round trips.
func TestAlignOverTheBootstrap(t *testing.T) {
	const n = 3
	clocks := make([]trace.Clock, n)
	errs := enginetest.WithComms(t, n, engine.Options{}, func(r int, c *engine.Comm) error {
		jc, ok := c.Boot.(*bootstrap.Bootstrap)
		if !ok {
			return fmt.Errorf("not a bootstrap: %T", c.Boot)
		}
		var err error
		clocks[r], err = trace.Align(context.Background(), jc, trace.DefaultRounds)
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := 1; r < n; r++ {
		d := clocks[r].Zero.Sub(clocks[0].Zero)
		if bound := (clocks[r].RTT + clocks[0].RTT) / 2; d < -bound || d > bound {
			t.Errorf("rank %d's job time 0 is %v from rank 0's (round trips %v, %v)", r, d, clocks[r].RTT, clocks[0].RTT)
		}
	}
}
