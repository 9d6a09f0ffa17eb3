package bootstrap

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// UnixPrefix marks a rendezvous address that is a Unix socket path
// ("unix:/tmp/luacoll-1000/openmpi-0123abcd.sock"). Such a meeting point
// works on one host only; its directory must belong to this user and be
// closed to everyone else, so that no other user can listen or dial there.
const UnixPrefix = "unix:"

// splitAddr returns the network and address of a rendezvous address.
func splitAddr(addr string) (network, address string) {
	if p, ok := strings.CutPrefix(addr, UnixPrefix); ok {
		return "unix", p
	}
	return "tcp", addr
}

// listenAddr listens on a rendezvous address for rank 0.
func listenAddr(addr string) (net.Listener, error) {
	network, a := splitAddr(addr)
	if network == "unix" {
		return listenUnix(a)
	}
	return net.Listen(network, a)
}

// listenUnix listens at path, making its directory (mode 0700) when it
// does not exist. A socket file left there by a rank 0 that died before
// every rank joined is replaced; a live one is an error.
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("making the meeting directory: %w", err)
	}
	if err := CheckPrivateDir(dir); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return l, err
	}
	if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
		_ = c.Close()
		return nil, fmt.Errorf("another job is already meeting at %s (same launcher job id?)", path)
	}
	if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing a stale socket: %w", rerr)
	}
	return net.Listen("unix", path)
}

// errNotYet is a meeting directory that rank 0 has not made yet.
var errNotYet = errors.New("rank 0 has not made the meeting directory yet")

// checkDialUnix is called before dialing a Unix meeting point: the
// directory must exist (else errNotYet, worth retrying) and be private.
func checkDialUnix(path string) error {
	dir := filepath.Dir(path)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return errNotYet
	}
	return CheckPrivateDir(dir)
}

// CheckPrivateDir reports an error unless dir is a directory (not a
// symbolic link) owned by this user that no one else may read, write or
// enter.
func CheckPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("meeting directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("meeting directory %s is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("meeting directory %s: cannot read its owner", dir)
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("meeting directory %s belongs to uid %d, not to this user (uid %d)", dir, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("meeting directory %s has mode %#o: others may use it (want 0700)", dir, perm)
	}
	return nil
}
