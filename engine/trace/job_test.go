package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The parts' directory is named as the launcher's temporary directories
// are (luacoll-KIND-PID-*), which `luacoll clean` knows and removes once
// the process that made it is gone.
func TestJobDirNamedForClean(t *testing.T) {
	j, err := NewJob(filepath.Join(t.TempDir(), "trace.json"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(j.Dir())
	want := regexp.MustCompile(fmt.Sprintf(`^luacoll-trace-%d-[^/]+$`, os.Getpid()))
	if base := filepath.Base(j.Dir()); !want.MatchString(base) {
		t.Fatalf("parts' directory %q, want luacoll-trace-%d-*", base, os.Getpid())
	}
}
