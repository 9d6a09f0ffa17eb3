package luabind

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
	"github.com/luacoll/luacoll/window"
)

// BenchmarkLuaSignalRoundTrip measures the Lua side of a host-issued step:
// put_signal to itself, wait_signal_from, sync, on one rank of the host
// backend, b.N times in one chunk.
func BenchmarkLuaSignalRoundTrip(b *testing.B) {
	code := fmt.Sprintf(`local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local src = lc.buffer(8)
for i = 1, %d do
  w:put_signal(0, 0, src, 0, 8, 0)
  w:wait_signal_from(0, 0, ">=", i)
  w:sync()
end
w:free()`, b.N)
	runLuaBench(b, code)
}

// BenchmarkGoSignalRoundTrip is BenchmarkLuaSignalRoundTrip's loop written
// in Go against the same window API: the difference is the Lua layer.
func BenchmarkGoSignalRoundTrip(b *testing.B) {
	g := inproc.NewGroup(1)
	// A cancellable context, as a Lua rank has.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comm, err := enginetest.OpenInProc(ctx, g, 0, enginetest.JobID("gb"), engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer comm.Close(nil)
	w, err := comm.NewWindow(ctx, "bench", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer comm.FreeWindow(ctx, w)
	src, err := comm.NewBuffer(8)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Free()
	put := window.Transfer{Peer: 0, Local: src, N: 8}
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		sig := &window.Sig{ID: 0, Value: 1}
		if err := w.PutSignal(put, sig, nil); err != nil {
			b.Fatal(err)
		}
		if err := w.WaitSignalFrom(0, 0, transport.CmpGe, uint64(i)); err != nil {
			b.Fatal(err)
		}
		if err := w.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLuaCallOverhead: three window method calls that do almost
// nothing (read one signal slot of this rank), from Lua.
func BenchmarkLuaCallOverhead(b *testing.B) {
	code := fmt.Sprintf(`local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
for i = 1, %d do
  w:read_signal_from(0, 0)
  w:read_signal_from(0, 0)
  w:read_signal_from(0, 0)
end
w:free()`, b.N)
	runLuaBench(b, code)
}

// runLuaBench runs code on one host rank from here on the clock.
func runLuaBench(b *testing.B, code string) {
	b.Helper()
	b.ResetTimer()
	res := runLuaWith(&testing.T{}, 1, code, "bench.lua", 0)
	if res[0].err != nil {
		b.Fatal(res[0].err)
	}
}
