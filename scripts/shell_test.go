package scripts

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The shell scripts run where CI cannot follow them (the GPU machine, the
// namespaces of several hosts), so a mistake there costs device time: every
// one parses (bash -n), and every embedded script one of them runs by name
// (tests/x.lua, bench/x.lua, examples/x.lua) exists.
func TestShellScripts(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var files []string
	for _, dir := range []string{".", "bench", "../.ci"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".sh") || dir == "../.ci" && e.Name() == "run") {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d shell scripts found: %v", len(files), files)
	}
	names := Names()
	ref := regexp.MustCompile(`\b((?:tests|bench|examples)/[A-Za-z0-9_]+\.lua)\b`)
	for _, f := range files {
		if out, err := exec.Command(bash, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", f, err, out)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(data), -1) {
			if !slices.Contains(names, m[1]) {
				if _, err := fs.Stat(FS, m[1]); err != nil {
					t.Errorf("%s runs %s, which is not an embedded script", f, m[1])
				}
			}
		}
	}
}
