package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// connectUnix starts size ranks at addr, rank 0 after delay0, runs an
// all-gather of each rank's number and closes them. It returns the errors
// by rank.
func connectUnix(t *testing.T, addr string, size int, delay0 time.Duration) []error {
	t.Helper()
	errs := make([]error, size)
	boots := make([]*Bootstrap, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r == 0 {
				time.Sleep(delay0)
			}
			boots[r], errs[r] = Connect(context.Background(), Config{Rank: r, Size: size, Addr: addr, Timeout: testTimeout})
			if errs[r] != nil {
				return
			}
			all, err := boots[r].AllGather(context.Background(), []byte{byte(r)})
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(i)
			}
			if err == nil && !bytes.Equal(bytes.Join(all, nil), want) {
				err = fmt.Errorf("allgather: %v", all)
			}
			errs[r] = err
		}()
	}
	waitOrFail(t, &wg, 15*time.Second, "unix job")
	job := &testJob{boots: boots}
	for r, err := range job.closeAll(t) {
		if errs[r] == nil {
			errs[r] = err
		}
	}
	return errs
}

// privateDir makes a directory of mode 0700.
func privateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBootstrapUnixMeetingPoint: rank 0 makes the private directory and
// listens at the socket path; the others, started first, wait for it. Once
// everyone has joined the socket is gone.
func TestBootstrapUnixMeetingPoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meet")
	path := filepath.Join(dir, "job.sock")
	noErrors(t, connectUnix(t, UnixPrefix+path, 3, 300*time.Millisecond))
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("meeting directory: %v", err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("meeting directory mode %#o, want 0700", fi.Mode().Perm())
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left behind after the job met: %v", err)
	}
}

// TestBootstrapUnixStaleSocket: a socket file nobody listens on (rank 0 of
// an earlier job killed while meeting) is replaced.
func TestBootstrapUnixStaleSocket(t *testing.T) {
	dir := privateDir(t)
	path := filepath.Join(dir, "job.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not left for the test: %v", err)
	}
	noErrors(t, connectUnix(t, UnixPrefix+path, 2, 0))
}

// TestBootstrapUnixLiveSocket: a socket someone listens on is not taken
// over.
func TestBootstrapUnixLiveSocket(t *testing.T) {
	dir := privateDir(t)
	path := filepath.Join(dir, "job.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, err = Connect(context.Background(), Config{Rank: 0, Size: 2, Addr: UnixPrefix + path, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "another job is already meeting at "+path) {
		t.Fatalf("rank 0 over a live socket: %v", err)
	}
}

// TestBootstrapUnixDirectoryNotPrivate: neither rank 0 nor the others use
// a directory that others may enter.
func TestBootstrapUnixDirectoryNotPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	addr := UnixPrefix + filepath.Join(dir, "job.sock")
	for r := range 2 {
		_, err := Connect(context.Background(), Config{Rank: r, Size: 2, Addr: addr, Timeout: time.Second})
		if err == nil || !strings.Contains(err.Error(), "has mode 0755: others may use it") {
			t.Errorf("rank %d in an open directory: %v", r, err)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivateDir(link); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("symbolic link accepted as the meeting directory: %v", err)
	}
}

// TestBootstrapUnixNoRank0: without rank 0 the others give up at their
// deadline, naming the socket.
func TestBootstrapUnixNoRank0(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "job.sock")
	_, err := Connect(context.Background(), Config{Rank: 1, Size: 2, Addr: UnixPrefix + path, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "cannot reach rank 0 at "+UnixPrefix+path) {
		t.Fatalf("rank 1 without rank 0: %v", err)
	}
}
