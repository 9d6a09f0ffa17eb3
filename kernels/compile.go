// Package kernels holds luacoll's CUDA device kernels (put, signal, wait,
// barrier, counter add, fill, checksum, equal and a raw ping-pong) and their
// Go launchers.
//
// The CUDA C sources (*.cu, embedded) are compiled on first use by NVRTC
// for the device's architecture, in parts compiled at once (parts.go), into
// CUBINs cached on disk in one file,
// os.UserCacheDir()/luacoll/kernels/<key>-sm_XY.cubins, where key is the
// first 16 hex digits of sha256(every part's source + options). Cache files
// are written atomically (temporary file + rename); a corrupt or unloadable
// cache file is recompiled.
package kernels

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

//go:embed *.cu
var sourceFS embed.FS

// Source returns the CUDA C program: the embedded .cu files concatenated in
// name order (common.cu first).
func Source() string {
	names, err := fs.Glob(sourceFS, "*.cu")
	if err != nil {
		panic(fmt.Sprintf("kernels: embedded sources: %v", err))
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		data, err := sourceFS.ReadFile(n)
		if err != nil {
			panic(fmt.Sprintf("kernels: embedded %s: %v", n, err))
		}
		fmt.Fprintf(&b, "// ---- %s ----\n", n)
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}

// Arch is a real GPU architecture, e.g. {9, 0} for sm_90.
type Arch struct{ Major, Minor int }

// String returns "sm_XY".
func (a Arch) String() string { return fmt.Sprintf("sm_%d%d", a.Major, a.Minor) }

// CompileOptions returns the NVRTC options used for arch.
func CompileOptions(a Arch) []string {
	return []string{"--gpu-architecture=" + a.String(), "--std=c++17"}
}

// CacheKey returns the cache key of the program for arch: the first 16 hex
// digits of sha256(every part's source + options), joined by NUL bytes.
func CacheKey(a Arch) string {
	h := sha256.New()
	for p := range ProgramParts {
		h.Write([]byte(partSource(p)))
		h.Write([]byte{0})
	}
	for _, o := range CompileOptions(a) {
		h.Write([]byte{0})
		h.Write([]byte(o))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// DefaultCacheDir returns os.UserCacheDir()/luacoll/kernels.
func DefaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kernel cache directory: %w", err)
	}
	return filepath.Join(base, "luacoll", "kernels"), nil
}

// CachePath returns the cache file of the program for arch under dir.
func CachePath(dir string, a Arch) string {
	return filepath.Join(dir, CacheKey(a)+"-"+a.String()+".cubins")
}

// Compiled is the kernel program, its parts' CUBINs (part 0 first), and
// where it came from.
type Compiled struct {
	Parts    [][]byte
	Arch     Arch
	Path     string        // cache file ("" when caching is off)
	CacheHit bool          // read from the cache, not compiled
	Log      string        // NVRTC warnings, when compiled
	Took     time.Duration // compile or cache read time
}

// CompileNotice is what to tell a user before the kernel program is
// compiled for a (NVRTC takes up to a minute for it): "" when the cache in
// dir holds it already.
func CompileNotice(dir string, a Arch) string {
	if dir != "" && readCached(CachePath(dir, a), a, time.Now()) != nil {
		return ""
	}
	return compilingLine(dir, a)
}

// compilingLine is CompileNotice's line where the program is not cached.
func compilingLine(dir string, a Arch) string {
	where := "with no cache directory: every run compiles"
	if dir != "" {
		where = "then cached in " + dir
	}
	return fmt.Sprintf("compiling the CUDA kernels for %s, once for this build (it can take a minute); %s", a, where)
}

// Compile returns the CUBIN for arch, from the cache in cacheDir when a valid
// one is there, else compiled with nv (loaded with cuda.LoadNVRTC when nil)
// and stored. An empty cacheDir disables the cache.
func Compile(nv *cuda.NVRTC, a Arch, cacheDir string) (*Compiled, error) {
	return compileTelling(nv, a, cacheDir, nil)
}

// compileTelling is Compile, telling notice (when not nil) CompileNotice's
// line before it compiles.
func compileTelling(nv *cuda.NVRTC, a Arch, cacheDir string, notice func(string)) (*Compiled, error) {
	return cached(func() (*Compiled, error) { return compileNow(nv, a) }, a, cacheDir, nil, notice)
}

// cached is the program for a from the cache in cacheDir, else made by
// compile and stored there. A cache file whose bytes are bad (a program
// that parses but did not load) counts as none. The ranks of a job start
// together: one of the machine compiles while the others wait on the lock
// beside the cache file, then read what it wrote (the one that compiles
// tells notice, so a job says it once).
// Without the lock (a read-only directory) each compiles; a program that
// cannot be stored is used all the same, and notice says why it is not
// cached.
func cached(compile func() (*Compiled, error), a Arch, cacheDir string, bad []byte, notice func(string)) (*Compiled, error) {
	start := time.Now()
	tell := func(line string) {
		if notice != nil {
			notice(line)
		}
	}
	var path string
	if cacheDir != "" {
		path = CachePath(cacheDir, a)
		read := func() *Compiled {
			if c := readCached(path, a, start); c != nil && (bad == nil || !bytes.Equal(CacheFile(c.Parts), bad)) {
				return c
			}
			return nil
		}
		if c := read(); c != nil {
			return c, nil
		}
		if unlock, err := lockFile(path + ".lock"); err == nil {
			defer unlock()
			if c := read(); c != nil {
				return c, nil
			}
		}
	}
	tell(compilingLine(cacheDir, a))
	c, err := compile()
	if err != nil {
		return nil, err
	}
	c.Path = path
	if path != "" {
		if err := writeAtomic(path, CacheFile(c.Parts)); err != nil {
			c.Path = ""
			tell(fmt.Sprintf("the CUDA kernels for %s are not cached (the next run compiles them again): %v", a, err))
		}
	}
	c.Took = time.Since(start)
	return c, nil
}

// readCached is the program in the cache file at path, or nil when there
// is none or it is corrupt (then overwritten by the compile).
func readCached(path string, a Arch, start time.Time) *Compiled {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	parts, ok := parseCacheFile(b)
	if !ok {
		return nil
	}
	return &Compiled{Parts: parts, Arch: a, Path: path, CacheHit: true, Took: time.Since(start)}
}

// lockWait is how long a process waits for another's compile (a few
// times the longest seen) before it compiles on its own: one stopped or
// stuck holding the lock delays the others, never stops them.
const lockWait = 3 * time.Minute

// lockFile takes an exclusive lock on the file at path (made if missing),
// waiting up to lockWait for whoever holds it; unlock releases it. The
// kernel takes the lock back from a process that dies holding it.
func lockFile(path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func compileNow(nv *cuda.NVRTC, a Arch) (*Compiled, error) {
	if nv == nil {
		var err error
		nv, err = cuda.LoadNVRTC()
		if err != nil {
			return nil, fmt.Errorf("compile luacoll kernels for %s: %w", a, err)
		}
		defer nv.Close()
	}
	return compileParts(nv, a)
}

// parseCUBIN parses b as an ELF file. A CUBIN's ELF header carries CUDA's
// own version in e_version (NVRTC 11.8 writes 118, 12.4 writes 124, where
// ELF has only 1), which debug/elf refuses: the copy it parses has 1 there.
func parseCUBIN(b []byte) (*elf.File, error) {
	if len(b) < 64 {
		return nil, errors.New("shorter than an ELF header")
	}
	h := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(h[elfVersionAt:], uint32(elf.EV_CURRENT))
	return elf.NewFile(bytes.NewReader(h))
}

// validCUBIN checks that b parses as a complete ELF file with sections (a
// truncated or garbled cache file fails).
func validCUBIN(b []byte) bool {
	if len(b) < 64 || !bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
		return false
	}
	f, err := parseCUBIN(b)
	if err != nil {
		return false
	}
	defer f.Close()
	if len(f.Sections) == 0 {
		return false
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOBITS && s.Offset+s.FileSize > uint64(len(b)) {
			return false
		}
	}
	return true
}

// elfVersionAt is the offset of e_version in an ELF header (after the
// 16-byte ident, e_type and e_machine).
const elfVersionAt = 0x14

// writeAtomic writes data to path through a temporary file in the same
// directory and a rename, so readers never see a partial file.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	removeStaleTemps(dir)
	tmp, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	// Readable by the machine's other users, as a file os.Create makes,
	// and on disk before it takes the cache file's name.
	_, werr := tmp.Write(data)
	merr := tmp.Chmod(0o644)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, merr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("kernel cache: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("kernel cache: %w", err)
	}
	return nil
}

// tempPattern names writeAtomic's temporary files.
const tempPattern = ".tmp-*.cubin"

// staleTemp is the age past which a temporary file of writeAtomic's is
// one a process left behind when it died, not one being written.
const staleTemp = time.Hour

// removeStaleTemps removes the temporary files in dir older than
// staleTemp.
func removeStaleTemps(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, tempPattern))
	for _, name := range names {
		if fi, err := os.Stat(name); err == nil && time.Since(fi.ModTime()) > staleTemp {
			_ = os.Remove(name)
		}
	}
}
