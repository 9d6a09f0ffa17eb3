package trace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// WriteFile replaces a regular file atomically, writes a symbolic link's
// target (the link stays), writes a device in place without replacing it,
// and refuses a directory.
func TestWriteFileTargets(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.json")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	// A device of its own (null's numbers, 1:3) where this may make one:
	// never one of the system's.
	dev := filepath.Join(dir, "null")
	paths := []string{target, link, filepath.Join(dir, "new.json")}
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		paths = append(paths, dev)
	} else {
		dev = ""
		t.Logf("no device node here (%v): that case is left out", err)
	}
	for _, p := range paths {
		if _, err := WriteFile(p, nil, nil); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) == "old" || len(b) == 0 {
		t.Errorf("the link's target holds %q (%v)", b, err)
	}
	if fi, err := os.Stat(dev); dev != "" && (err != nil || fi.Mode()&os.ModeCharDevice == 0) {
		t.Fatalf("%s is no longer a device: %v %v", dev, fi.Mode(), err)
	}
	if _, err := WriteFile(dir, nil, nil); err == nil {
		t.Errorf("a directory was taken")
	}
}
