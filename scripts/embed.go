package scripts

import (
	"embed"
	"io/fs"
	"strings"
)

// FS holds examples/, lib/, bench/ and tests/ (the window suite).
//
//go:embed examples lib bench tests
var FS embed.FS

// Names lists the embedded scripts that run by name (examples/, bench/
// and tests/; not the lib/ modules), sorted.
func Names() []string {
	var out []string
	for _, dir := range []string{"examples", "bench", "tests"} {
		entries, _ := fs.ReadDir(FS, dir)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".lua") {
				out = append(out, dir+"/"+e.Name())
			}
		}
	}
	return out
}

// Modules lists the embedded lib/ modules by the name require() takes,
// sorted.
func Modules() []string {
	var out []string
	entries, _ := fs.ReadDir(FS, "lib")
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".lua"); ok {
			out = append(out, name)
		}
	}
	return out
}
