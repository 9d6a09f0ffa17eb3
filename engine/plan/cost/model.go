package cost

import (
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/luacoll/luacoll/transport"
)

// Cost is the time of one op of a class: a start cost and a per-byte cost.
// A put of n bytes takes AlphaNs + n*BetaNs nanoseconds, unless measured
// times are given: TimesNs[i] at Sizes[i] bytes (sizes increasing), which
// the time of n bytes is interpolated between (caches make the per-byte
// cost of a copy depend on its size), AlphaNs + n*(TimesNs[0]-AlphaNs)/
// Sizes[0] below the first, and BetaNs a byte more past the last.
type Cost struct {
	AlphaNs float64   `json:"alpha_ns"`
	BetaNs  float64   `json:"beta_ns_per_byte"`
	Sizes   []uint64  `json:"sizes,omitempty"`
	TimesNs []float64 `json:"times_ns,omitempty"`
}

// Of returns the time of an op of n bytes: its start cost and its link time.
func (c Cost) Of(n uint64) (start, link float64) {
	k := len(c.Sizes)
	if k == 0 {
		return c.AlphaNs, float64(n) * c.BetaNs
	}
	x := float64(n)
	var t float64
	switch i := sort.Search(k, func(i int) bool { return c.Sizes[i] >= n }); {
	case i == 0:
		t = c.AlphaNs + x*(c.TimesNs[0]-c.AlphaNs)/float64(c.Sizes[0])
	case i == k:
		t = c.TimesNs[k-1] + (x-float64(c.Sizes[k-1]))*c.BetaNs
	default:
		x0, x1 := float64(c.Sizes[i-1]), float64(c.Sizes[i])
		t = c.TimesNs[i-1] + (x-x0)*(c.TimesNs[i]-c.TimesNs[i-1])/(x1-x0)
	}
	start = min(c.AlphaNs, t)
	return start, t - start
}

// zero reports whether c costs nothing (a cost not measured).
func (c Cost) zero() bool {
	return c.AlphaNs == 0 && c.BetaNs == 0 && len(c.TimesNs) == 0
}

// Equal reports whether c and d are the same cost.
func (c Cost) Equal(d Cost) bool {
	if c.AlphaNs != d.AlphaNs || c.BetaNs != d.BetaNs || len(c.Sizes) != len(d.Sizes) || len(c.TimesNs) != len(d.TimesNs) {
		return false
	}
	for i := range c.Sizes {
		if c.Sizes[i] != d.Sizes[i] {
			return false
		}
	}
	for i := range c.TimesNs {
		if c.TimesNs[i] != d.TimesNs[i] {
			return false
		}
	}
	return true
}

func (c Cost) check() error {
	for _, v := range append([]float64{c.AlphaNs, c.BetaNs}, c.TimesNs...) {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("cost %v must be a finite number >= 0", v)
		}
	}
	if len(c.Sizes) != len(c.TimesNs) {
		return fmt.Errorf("%d sizes but %d times", len(c.Sizes), len(c.TimesNs))
	}
	for i, n := range c.Sizes {
		if n == 0 || (i > 0 && n <= c.Sizes[i-1]) {
			return fmt.Errorf("sizes must be positive and increasing (%v)", c.Sizes)
		}
	}
	return nil
}

// Params are the costs of the ops to a peer of one transport class in one
// replay mode. Put covers put, get and the data of put_signal and
// put_counter; Signal a signal's store (signal, signal_all per peer, the
// signal of a put_signal); Wait the time from a wait's condition holding to
// the stream going on (also what fence and flush cost); Copy a fill of n
// bytes; Barrier a barrier over all ranks or a pair (Beta is per rank, not
// per byte).
//
// Op is the software time of taking one op off a rank's list and setting
// it going (a host replay's loop and its stream's dispatch), paid by every
// op to a peer of the class (the self class's by ops with no peer) before
// its own costs above, which then hold only what the op itself does; a
// wait pays it as it reaches the wait, hidden when it then blocks. Replay
// (the self class's; Beta unused) is the fixed time of one replay on a
// rank, paid before its first op. Both are zero in models calibrated
// before they were measured.
//
// Flush (the self class's; Beta unused), where measured, is what a flush
// or fence costs a host replay whose ops ran as they were issued (nothing
// is left in flight): in place of its op cost and Wait. Nil: they cost
// their op cost and Wait, as in models calibrated before it was measured.
//
// Moved (the self class's), where measured, is what a put or copy costs
// beyond its own for n bytes it reads that another rank wrote (their
// lines come from that rank's processor; the other costs were measured
// with bytes the rank itself wrote): per size, as a put's (moved.go).
//
// Call (the self class's; Beta unused), where measured, is what one
// p:run of a single replay costs beyond the replay, on a backend whose
// replays are launched (CUDA: the launch of the interpreter, or the
// graph, that every call makes; a run of many replays pays it once). It
// is part of Result.PerCall, not of a replay's time; zero where not
// measured (host mode: a call's own time is a Go call's).
//
// Trip (a class's; Beta unused), where measured, is what a flush waits
// for once the last put or signal it completes to a peer of the class
// landed: for net, the peer's answer on its way back, the calibrated
// one-way hop (net.go). Zero: the class's 8-byte put_signal and wait,
// as in models calibrated before it was measured.
//
// Switch (the self class's; Beta unused) is what it costs a processor to
// pass from one rank to another when the ranks of a host outnumber its
// CPUs and take turns on them (cpus.go): a blocked rank's yield and the
// other rank's return to its loop. It is measured with as many ranks as
// the model is used with (luacoll calibrate -n 4 on 2 CPUs); unused when
// every rank has a CPU, zero where not measured.
//
// Memory (the self class's, host backend), where measured, is the
// processors' last-level cache and what a byte costs past it (memory.go).
type Params struct {
	Put     Cost    `json:"put"`
	Signal  Cost    `json:"signal"`
	Wait    Cost    `json:"wait"`
	Copy    Cost    `json:"copy"`
	Barrier Cost    `json:"barrier"`
	Op      Cost    `json:"op,omitzero"`
	Replay  Cost    `json:"replay,omitzero"`
	Flush   *Cost   `json:"flush,omitempty"`
	Moved   Cost    `json:"moved,omitzero"`
	Switch  Cost    `json:"switch,omitzero"`
	Call    Cost    `json:"call,omitzero"`
	Trip    Cost    `json:"trip,omitzero"`
	Memory  *Memory `json:"memory,omitempty"`
}

// Model is a calibrated machine: where it was measured and, per replay
// mode ("host", "stream", "graph", "device"), the Params of each transport
// class ("self", "shm", "nvl", "net").
type Model struct {
	Machine string `json:"machine"`
	Backend string `json:"backend"`
	Made    string `json:"made,omitempty"`
	Command string `json:"command,omitempty"`
	Note    string `json:"note,omitempty"`
	// Modes[mode][class] are the costs of ops to a peer of that class.
	Modes map[string]map[string]Params `json:"modes"`
}

// shipped are the models made on the machines luacoll is measured on,
// models/BACKEND.json ("host"; "cuda" once calibrated there).
//
//go:embed models/*.json
var shipped embed.FS

// Default returns the model shipped for backend ("host" or "cuda"; a
// backend's name with its device, "cuda:0", names its kind), or an error
// saying none is.
func Default(backend string) (*Model, error) {
	kind, _, _ := strings.Cut(backend, ":")
	data, err := shipped.ReadFile("models/" + kind + ".json")
	if err != nil {
		return nil, fmt.Errorf("cost: no model is shipped for the %s backend (luacoll calibrate writes one)", backend)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("cost: the shipped %s model: %w", backend, err)
	}
	return m, nil
}

// Load returns the model a name gives: "host" or "cuda" for the model
// shipped for that backend, else a JSON file `luacoll calibrate` wrote.
func Load(name string) (*Model, error) {
	if name == "host" || name == "cuda" {
		return Default(name)
	}
	return LoadFile(name)
}

// LoadFile reads the model in the file path (a name of a shipped model
// is a file here too: calibrate -o host writes ./host).
func LoadFile(name string) (*Model, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// Parse decodes and checks a model's JSON.
func Parse(data []byte) (*Model, error) {
	var m Model
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	// The costs every estimate reads must be in the file (a cost of 0
	// measured is one; one left out is not).
	var keys struct {
		Modes map[string]map[string]map[string]json.RawMessage `json:"modes"`
	}
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	for _, mode := range m.ModeNames() {
		for _, name := range slices.Sorted(maps.Keys(keys.Modes[mode])) {
			var lack []string
			for _, k := range []string{"put", "signal", "wait", "copy", "barrier"} {
				if _, ok := keys.Modes[mode][name][k]; !ok {
					lack = append(lack, k)
				}
			}
			if len(lack) > 0 {
				return nil, fmt.Errorf("model: mode %q, class %q has no %s cost (every class needs put, signal, wait, copy and barrier: luacoll calibrate measures them)",
					mode, name, strings.Join(lack, ", "))
			}
		}
	}
	return &m, nil
}

// Check reports the first thing wrong with m: no modes, an unknown class,
// or a cost that is negative or not a number.
func (m *Model) Check() error {
	if len(m.Modes) == 0 {
		return fmt.Errorf("model: no modes")
	}
	if kind, _, _ := strings.Cut(m.Backend, ":"); kind != "" && kind != "host" && kind != "cuda" {
		return fmt.Errorf("model: backend %q: want host or cuda (cuda:N)", m.Backend)
	}
	for _, mode := range m.ModeNames() {
		classes := m.Modes[mode]
		if !slices.Contains(modeNames, mode) {
			return fmt.Errorf("model: mode %q: want one of %v", mode, modeNames)
		}
		if len(classes) == 0 {
			return fmt.Errorf("model: mode %q has no classes", mode)
		}
		for name, p := range classes {
			if _, err := transport.ParseKind(name); err != nil {
				return fmt.Errorf("model: mode %q: %w", mode, err)
			}

			costs := map[string]Cost{"put": p.Put, "signal": p.Signal, "wait": p.Wait, "copy": p.Copy, "barrier": p.Barrier, "op": p.Op, "replay": p.Replay, "switch": p.Switch, "moved": p.Moved, "call": p.Call, "trip": p.Trip}
			if p.Flush != nil {
				costs["flush"] = *p.Flush
			}
			for op, c := range costs {
				if err := c.check(); err != nil {
					return fmt.Errorf("model: mode %q, class %q, %s: %w", mode, name, op, err)
				}
			}
			if p.Memory != nil {
				if err := p.Memory.check(); err != nil {
					return fmt.Errorf("model: mode %q, class %q, memory: %w", mode, name, err)
				}
			}
		}
	}
	return nil
}

// modeNames are the replay modes a model may hold.
var modeNames = []string{"host", "stream", "device", "graph"}

// ModeNames returns the model's modes, sorted.
func (m *Model) ModeNames() []string {
	var out []string
	for k := range m.Modes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// table returns the Params of mode per class (indexed by PeerKind), or an
// error naming what the model lacks. A class the model does not have
// borrows the nearest one it has (nvl from shm and back; net from nvl or
// shm), so a host model estimates plans whatever the classes; missing
// lists the classes so borrowed.
func (m *Model) table(mode string) (t [4]Params, missing []string, err error) {
	classes, ok := m.Modes[mode]
	if !ok {
		return t, nil, fmt.Errorf("the model has no mode %q (it has %s)", mode, strings.Join(m.ModeNames(), ", "))
	}
	order := map[transport.PeerKind][]transport.PeerKind{
		transport.KindSelf: {transport.KindSelf, transport.KindSHM, transport.KindNVL, transport.KindNet},
		transport.KindSHM:  {transport.KindSHM, transport.KindNVL, transport.KindSelf, transport.KindNet},
		transport.KindNVL:  {transport.KindNVL, transport.KindSHM, transport.KindSelf, transport.KindNet},
		transport.KindNet:  {transport.KindNet, transport.KindNVL, transport.KindSHM, transport.KindSelf},
	}
	for k := transport.KindSelf; k <= transport.KindNet; k++ {
		for i, try := range order[k] {
			if p, ok := classes[try.String()]; ok {
				t[k] = p
				if i > 0 {
					missing = append(missing, k.String())
				}
				break
			}
		}
	}
	return t, missing, nil
}
