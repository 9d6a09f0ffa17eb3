package launch

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The launcher reads a job's script once and hands every rank the same
// bytes through an inherited descriptor, so that a script from standard
// input or a FIFO works and a file edited during start-up cannot give the
// ranks different code.
const (
	// EnvScriptFD names the descriptor holding the script (LaunchConfig.Files).
	EnvScriptFD = "LUACOLL_SCRIPT_FD"
	// EnvScriptName is the name the script's messages use ("stdin" for -).
	EnvScriptName = "LUACOLL_SCRIPT_NAME"
)

// SharedBytes returns an anonymous, sealed in-memory file holding data
// (memfd): nothing on disk to clean up, and no rank can change it.
func SharedBytes(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd for %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	// Sealing is a safeguard; a kernel that refuses it still shares the bytes.
	_, _ = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	return f, nil
}

// ReadInherited reads the whole file open as descriptor fd from its start
// (with pread: the ranks share its offset) and closes it.
func ReadInherited(fd int) ([]byte, error) {
	if fd < 3 {
		return nil, fmt.Errorf("inherited descriptor %d: not one the launcher hands over", fd)
	}
	f := os.NewFile(uintptr(fd), "inherited")
	if f == nil {
		return nil, fmt.Errorf("inherited descriptor %d is not open", fd)
	}
	defer f.Close()
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := f.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading inherited descriptor %d: %w", fd, err)
		}
	}
}
