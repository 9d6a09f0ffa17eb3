package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Node directories (--nodes) are found in both the shared-memory and the
// temporary directory: kept while the launcher named in them runs (or, for
// an older build's names, while a process has them in its environment),
// offered and removed once it is gone; removeStaleNodes removes exactly
// the unused.
func TestNodeDirectoriesAreFound(t *testing.T) {
	shm, tmp := t.TempDir(), t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skipf("no true: %v", err)
	}
	const job = "0123456789abcdef"
	mk := func(dir, name string) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	live := mk(shm, nodeDirName(os.Getpid(), job, 0))
	dead := mk(tmp, nodeDirName(gone.Process.Pid, job, 1))
	oldUnused := mk(shm, "luacoll-"+job+"-node0")
	oldUsed := mk(tmp, "luacoll-fedcba9876543210-node1")
	user := exec.Command("sleep", "30")
	user.Env = append(os.Environ(), EnvShmDir+"="+oldUsed)
	if err := user.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	defer func() { _ = user.Process.Kill(); _ = user.Wait() }()

	found, err := FindLeftovers(shm, tmp)
	if err != nil {
		t.Fatal(err)
	}
	inUse := map[string]bool{}
	for _, l := range found {
		if l.Kind != "node directory" {
			t.Errorf("%s: kind %q", l.Path, l.Kind)
		}
		inUse[l.Path] = l.InUse != ""
	}
	want := map[string]bool{live: true, dead: false, oldUnused: false, oldUsed: true}
	if len(found) != len(want) {
		t.Fatalf("found %v, want %v", found, want)
	}
	for p, used := range want {
		if got, ok := inUse[p]; !ok || got != used {
			t.Errorf("%s: found %v, in use %v; want in use %v", p, ok, got, used)
		}
	}
	removeStaleNodes(shm, tmp)
	for p, used := range want {
		_, err := os.Stat(p)
		if exists := err == nil; exists != used {
			t.Errorf("%s: exists %v after removeStaleNodes, want %v", p, exists, used)
		}
	}
}
