package simrank

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/engine/plan/verify"
)

// running is a verification under way, shown on the progress lines.
type running struct {
	num   int // the plan's number
	meter *verify.Meter
}

// progress prints the line msg returns when the last one is
// ProgressEvery old (none when it returns ""). msg runs under w.pmu.
func (w *world) progress(msg func() string) {
	if w.o.Progress == nil {
		return
	}
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if time.Since(w.last) < w.o.ProgressEvery {
		return
	}
	line := msg()
	if line == "" {
		return
	}
	w.last = time.Now()
	fmt.Fprintf(w.o.Progress, "luacoll check: %s (%.1f s, %s resident)\n", line, time.Since(w.start).Seconds(), Bytes(currentRSS()))
}

// runVerify verifies plan num's lists with options o, its progress shown
// on the progress lines while it runs.
func (w *world) runVerify(num int, lists []plan.List, o verify.Options) *verify.Report {
	v := &running{num: num, meter: &verify.Meter{}}
	o.Meter = v.meter
	w.pmu.Lock()
	w.running = append(w.running, v)
	w.pmu.Unlock()
	defer func() {
		w.pmu.Lock()
		w.running = slices.DeleteFunc(w.running, func(x *running) bool { return x == v })
		w.pmu.Unlock()
	}()
	return verify.Verify(lists, o)
}

// watchVerifications prints a progress line every ProgressEvery while a
// verification runs, saying how far each has got, until the returned
// function is called.
func (w *world) watchVerifications() func() {
	if w.o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(max(w.o.ProgressEvery/4, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			w.progress(w.verifyingLine)
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// verifyingLine says how far each running verification has got ("" when
// none runs: then progress prints nothing). Called under w.pmu.
func (w *world) verifyingLine() string {
	var parts []string
	for _, v := range w.running {
		ops, total := v.meter.Done()
		if total == 0 {
			parts = append(parts, fmt.Sprintf("plan %d starting", v.num))
			continue
		}
		parts = append(parts, fmt.Sprintf("plan %d %d %% of %s ops", v.num, 100*ops/total, count(total)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "verifying " + strings.Join(parts, ", ")
}

// count writes n with a unit: 4.2 M.
func count(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%.0f M", float64(n)/1e6)
	case n >= 1_000_000:
		return fmt.Sprintf("%.1f M", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0f k", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
