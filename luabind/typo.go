package luabind

import (
	"sort"

	lua "github.com/yuin/gopher-lua"
)

// guardMissing gives t a metatable whose __index raises an error naming
// the missing key and what it was looked up on (what, kind: "window",
// "method"), with the closest name t has when one is close enough:
// "window has no method put_sgnal; did you mean put_signal?". Keys t has
// are read as before (the metamethod runs on misses only), and
// completion, which reads t itself, is unchanged.
func guardMissing(L *lua.LState, t *lua.LTable, what, kind string) {
	mt := L.NewTable()
	L.SetField(mt, "__index", L.NewFunction(func(L *lua.LState) int {
		key, ok := L.Get(2).(lua.LString)
		if !ok {
			L.Push(lua.LNil)
			return 1
		}
		var names []string
		t.ForEach(func(k, _ lua.LValue) {
			if s, ok := k.(lua.LString); ok {
				names = append(names, string(s))
			}
		})
		msg := what + " has no " + kind + " " + string(key)
		if near := closest(string(key), names); near != "" {
			msg += "; did you mean " + near + "?"
		}
		L.RaiseError("%s", msg)
		return 0
	}))
	L.SetMetatable(t, mt)
}

// closest returns the name in names nearest to s by edit distance, when
// it is near enough to be a likely typo (at most a third of the longer
// name's letters differ, and no more than 3); "" otherwise. Ties go to
// the name first in sorted order.
func closest(s string, names []string) string {
	sort.Strings(names)
	best, bestD := "", 4
	for _, n := range names {
		d := editDistance(s, n)
		limit := max(len(s), len(n)) / 3
		if d <= limit && d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes; a swap of
// neighbours counts as one edit).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
