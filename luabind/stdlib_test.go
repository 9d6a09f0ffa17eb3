package luabind

import (
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// string.format and string.rep as GuardStdlib leaves them: the formats
// that work give what Lua 5.1 gives, a missing or mistyped argument and
// an unknown directive raise errors naming them, and a string.rep past
// MaxStringBytes is refused before it allocates.
func TestGuardStdlib(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	GuardStdlib(L)
	for _, c := range []struct{ code, want string }{
		{`return string.format("%d %5.2f %s %x %%", "10", 2.5, nil, 255)`, "10  2.50 nil ff %"},
		{`return string.format("%q|%-3d|%s", "a", 7, true)`, `"a"|7  |true`},
		{`return string.format("plain")`, "plain"},
		{`return string.rep("ab", 3)`, "ababab"},
		{`return string.rep("ab", 0)`, ""},
	} {
		if err := L.DoString(c.code); err != nil {
			t.Fatalf("%s: %v", c.code, err)
		}
		if got := L.ToString(-1); got != c.want {
			t.Errorf("%s = %q, want %q", c.code, got, c.want)
		}
		L.Pop(1)
	}
	for _, c := range []struct{ code, want string }{
		{`return string.format("%d", "x")`, "bad argument #2 to 'format' (number expected, got string)"},
		{`return string.format("%d %s", 1)`, "bad argument #3 to 'format' (string expected, got no value)"},
		{`return string.format("%s %f", "a")`, "bad argument #3 to 'format' (number expected, got no value)"},
		{`return string.format("%y", 1)`, "invalid option '%y'"},
		{`return string.format("100%")`, "it ends inside a % directive"},
		{`return string.rep("x", 2^40)`, "string.rep: 1099511627776 copies of 1 bytes make 1099511627776 bytes, over the 1073741824"},
		{`return string.rep("abcd", 2^62)`, "string.rep: 4611686018427387904 copies of 4 bytes make 18446744073709551616 bytes"}, // no wrap to 0
	} {
		err := L.DoString(c.code)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.code, err, c.want)
		}
	}
}
