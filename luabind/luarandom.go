package luabind

import (
	"math"
	"math/rand/v2"

	lua "github.com/yuin/gopher-lua"
)

// gopher-lua's math.random draws from Go's global generator, which
// math.randomseed no longer seeds (Go made rand.Seed a no-op), and it
// panics on an empty interval. luacoll gives each interpreter its own
// generator: math.randomseed(x) makes the sequence that follows depend on
// x alone, the same on every rank and in every run, as in lua; unseeded,
// it starts from a random seed. Seeding with lc.rank gives each rank a
// stream of its own.

// installRandom replaces math.random and math.randomseed.
func installRandom(L *lua.LState) {
	mt, ok := L.GetGlobal("math").(*lua.LTable)
	if !ok {
		return
	}
	gen := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	mt.RawSetString("randomseed", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() == 0 {
			gen = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			return 0
		}
		gen = rand.New(seededPCG(float64(L.CheckNumber(1))))
		return 0
	}))
	mt.RawSetString("random", L.NewFunction(func(L *lua.LState) int {
		switch L.GetTop() {
		case 0:
			L.Push(lua.LNumber(gen.Float64()))
			return 1
		case 1:
			hi := randomBound(L, 1)
			if hi < 1 {
				L.ArgError(1, "interval is empty")
			}
			L.Push(lua.LNumber(1 + gen.Int64N(hi)))
			return 1
		case 2:
			lo, hi := randomBound(L, 1), randomBound(L, 2)
			if lo > hi {
				L.ArgError(2, "interval is empty")
			}
			L.Push(lua.LNumber(lo + gen.Int64N(hi-lo+1)))
			return 1
		}
		L.RaiseError("wrong number of arguments")
		return 0
	}))
}

// seededPCG is the generator math.randomseed(x) starts: an integral x is
// taken as an integer (so 42 and 42.0 agree), any other as its bits.
func seededPCG(x float64) *rand.PCG {
	var s uint64
	if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
		s = uint64(int64(x))
	} else {
		s = math.Float64bits(x)
	}
	return rand.NewPCG(s, s^0x9E3779B97F4A7C15)
}

// randomBound is argument i of math.random as an integer within what a
// number holds exactly (lua: "number has no integer representation").
func randomBound(L *lua.LState, i int) int64 {
	f := float64(L.CheckNumber(i))
	if f != math.Floor(f) || math.Abs(f) > MaxExact {
		L.ArgError(i, "number has no integer representation")
	}
	return int64(f)
}
