package luabind

import (
	"strings"
	"testing"
)

// TestToNumberReadsExponents: tonumber reads what lua reads (script
// arguments such as "1e3" included) and refuses what lua refuses.
func TestToNumberReadsExponents(t *testing.T) {
	res := runLua(t, 1, `
local cases = { ["1e3"] = 1000, ["1E3"] = 1000, ["-2e-1"] = -0.2, ["1.5e2"] = 150, [" 12 "] = 12, ["0x10"] = 16,
  ["-0x1F"] = -31, ["+7"] = 7, [".5"] = 0.5, ["5."] = 5 }
for s, want in pairs(cases) do assert(tonumber(s) == want, s .. " gave " .. tostring(tonumber(s))) end
for _, s in ipairs({ "1e", "e3", "inf", "nan", "1_000", "0x1p3", "", "1 2", "--1" }) do
  assert(tonumber(s) == nil, s .. " gave " .. tostring(tonumber(s)))
end
assert(tonumber("10", 2) == 2 and tonumber("z", 36) == 35 and tonumber(4) == 4 and tonumber({}) == nil)
print("tonumber ok")`)
	mustAllOK(t, res)
	if !strings.Contains(res[0].out, "tonumber ok") {
		t.Fatal(res[0].out)
	}
}

// TestShebangAndBOM: a "#!" first line and a UTF-8 byte-order mark are
// skipped as lua skips them, and line numbers stay those of the file.
func TestShebangAndBOM(t *testing.T) {
	for name, src := range map[string]string{
		"shebang":     "#!/usr/bin/env luacoll run\nprint('ran')\nerror('line 3')\n",
		"bom":         "\xef\xbb\xbfprint('ran')\n\nerror('line 3')\n",
		"bom+shebang": "\xef\xbb\xbf#!/usr/bin/env luacoll run\nprint('ran')\nerror('line 3')\n",
	} {
		res := runLua(t, 1, src)
		if res[0].err == nil || !strings.Contains(res[0].err.Error(), "test.lua:3: line 3") || !strings.Contains(res[0].out, "ran") {
			t.Errorf("%s: %v\n%s", name, res[0].err, res[0].out)
		}
	}
}
