package trace

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// reached is a stream stamp passed at a fixed time.
type reached time.Time

func (s reached) Reached() (time.Time, bool) { return time.Time(s), true }

// A CUDA wait cut short by its timeout still passes its stream stamp; only
// the failed sync tells it from a wait that was met, so it must end no
// flow (its sender never posted the value). A wait in a clean sync does.
func TestFlowEndOnlyForAWaitThatWasMet(t *testing.T) {
	for _, failed := range []bool{true, false} {
		part := filepath.Join(t.TempDir(), "part.json")
		r, err := Start(Options{Rank: 0, Size: 2, Part: part, Clock: LocalClock()})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r.Op(window.Op{Name: "wait_signal_from", Window: 7, Peer: 1, Kind: window.SlotSignal, Slot: 6, Value: 3,
			Wait: true, Cmp: transport.CmpGe, Ctr: -1, Enqueued: start, Done: reached(start.Add(time.Millisecond))})
		var serr error
		if failed {
			serr = errors.New("wait_signal_from(peer 1, sig 6) >= 3: timed out after 200ms")
		}
		r.Sync(start, serr)
		if err := r.Close(nil); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(part)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ReadPart(f, 0)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends, waits := 0, 0
		for _, raw := range p.Events {
			var e struct{ Name, Ph string }
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			switch {
			case e.Ph == PhaseFlowEnd:
				ends++
			case e.Name == "wait_signal_from":
				waits++
			}
		}
		if want := map[bool]int{true: 0, false: 1}[failed]; ends != want || waits != 1 {
			t.Errorf("sync failed %v: %d flow ends, %d wait slices; want %d and 1", failed, ends, waits, want)
		}
	}
}
