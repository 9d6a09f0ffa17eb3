package kernels

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
)

// Tests that need no GPU.

// kernelDecl matches what a kernel's definition begins with (LC_KERNEL:
// extern "C" __global__ in the part that has it).
const kernelDecl = `(?:extern "C" __global__|LC_KERNEL) void `

// kernelBounds matches a kernel's optional launch bound before its name.
const kernelBounds = `(?:__launch_bounds__\(\w+\)\s+)?`

func TestSourceHasEveryKernel(t *testing.T) {
	src := Source()
	if !strings.HasPrefix(src, "// ---- common.cu ----") {
		t.Fatalf("common.cu must come first:\n%.200s", src)
	}
	for _, n := range Names() {
		if !regexp.MustCompile(kernelDecl + kernelBounds + n + `\(`).MatchString(src) {
			t.Errorf("kernel %s missing from the program", n)
		}
	}
	for _, bad := range []string{"__trap", "#include", "multimem", "cuMulticast"} {
		if strings.Contains(src, bad) {
			t.Errorf("program must not use %q", bad)
		}
	}
}

func TestCacheKey(t *testing.T) {
	a, b := Arch{9, 0}, Arch{8, 0}
	if k1, k2 := CacheKey(a), CacheKey(a); k1 != k2 || len(k1) != 16 {
		t.Fatalf("key %q", CacheKey(a))
	}
	if CacheKey(a) == CacheKey(b) {
		t.Fatal("different archs share a key")
	}
	p := CachePath("/c", a)
	if !strings.HasPrefix(p, "/c/") || !strings.HasSuffix(p, "-sm_90.cubins") {
		t.Fatalf("path %q", p)
	}
	if dir, err := DefaultCacheDir(); err == nil && !strings.HasSuffix(dir, filepath.Join("luacoll", "kernels")) {
		t.Fatalf("default dir %q", dir)
	}
}

func TestValidCUBINAndAtomicWrite(t *testing.T) {
	if validCUBIN(nil) || validCUBIN([]byte("\x7fELF garbage that is not a real file.........................")) {
		t.Fatal("garbage accepted as a CUBIN")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "x.cubin")
	if err := writeAtomic(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("%q %v", b, err)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestCompileWithoutNVRTC(t *testing.T) {
	if nv, err := cuda.LoadNVRTC(); err == nil {
		nv.Close()
		t.Skip("NVRTC present")
	}
	_, err := Compile(nil, Arch{9, 0}, "")
	if !errors.Is(err, cuda.ErrNoNVRTC) || !strings.Contains(err.Error(), "NVRTC not found (tried libnvrtc.so.13, libnvrtc.so.12") {
		t.Fatalf("err = %v", err)
	}
}

func TestReference(t *testing.T) {
	// Mix64 is splitmix64: the first output for seed 0 is known.
	if got := RandWord(0, 0); got != 0xE220A8397B1DCDAF {
		t.Fatalf("RandWord(0,0) = %#x", got)
	}
	b := make([]byte, 21)
	FillRand(b, 5)
	if binary.LittleEndian.Uint64(b) != RandWord(5, 0) || binary.LittleEndian.Uint64(b[8:]) != RandWord(5, 1) {
		t.Fatal("FillRand words")
	}
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], RandWord(5, 2))
	if !bytes.Equal(b[16:], w[:5]) {
		t.Fatal("FillRand tail")
	}
	if Checksum(nil) != 0 {
		t.Fatal("empty checksum")
	}
	data := make([]byte, 1000)
	FillRand(data, 1)
	c := Checksum(data)
	if n := uint64(len(data)); c != n*Golden+ChecksumPart(data[:504], 0)+ChecksumPart(data[504:], 63) {
		t.Fatal("checksum does not split at word boundaries")
	}
	data[999] ^= 1
	if Checksum(data) == c {
		t.Fatal("checksum missed a bit flip")
	}
	if Checksum(make([]byte, 8)) == Checksum(make([]byte, 16)) {
		t.Fatal("checksum ignores length")
	}
	if CountDiff([]byte("abcd"), []byte("abXY")) != 2 {
		t.Fatal("CountDiff")
	}
	u := make([]uint32, 3)
	FillIota32(u, 0xFFFFFFFF)
	if u[0] != 0xFFFFFFFF || u[1] != 0 || u[2] != 1 {
		t.Fatalf("iota %v", u)
	}
}

func TestCmp(t *testing.T) {
	for i, s := range []string{"==", "~=", "<", "<=", ">", ">="} {
		c, err := ParseCmp(s)
		if err != nil || int(c) != i || c.String() != s {
			t.Fatalf("%q -> %v %v", s, c, err)
		}
	}
	if c, _ := ParseCmp("!="); c != CmpNE {
		t.Fatal("!=")
	}
	if _, err := ParseCmp("=<"); err == nil {
		t.Fatal("bad op accepted")
	}
	if !CmpGE.Holds(3, 3) || CmpGT.Holds(3, 3) || !CmpLT.Holds(2, 3) || !CmpNE.Holds(1, 2) {
		t.Fatal("Holds")
	}
}

func TestRecord(t *testing.T) {
	var buf [4]uint64
	p := unsafe.Pointer(&buf[0])
	if err := CheckRecord(p, false); err != nil {
		t.Fatal(err)
	}
	*(*uint32)(unsafe.Add(p, 4)) = 3
	buf[1], buf[2], buf[3] = 7, 9, uint64(50*time.Millisecond)
	*(*uint32)(p) = uint32(StatusTimeout)
	err := CheckRecord(p, true)
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, ErrTimeout) || errors.Is(err, ErrAborted) || we.Slot != 3 || we.Observed != 7 || we.Target != 9 {
		t.Fatalf("err = %v", err)
	}
	if err.Error() != "device wait timed out after 50ms: slot 3 observed 7, target 9" {
		t.Fatalf("text %q", err.Error())
	}
	if ReadRecord(p) != (Record{}) {
		t.Fatal("not cleared")
	}
	var flag uint32
	SetAbort(unsafe.Pointer(&flag), true)
	if flag != 1 {
		t.Fatal("SetAbort")
	}
}

// TestNamesListEveryKernel: Load looks up every name of Names, so a kernel
// missing from it would be loaded on first launch, which waits for the
// kernels already running.
func TestNamesListEveryKernel(t *testing.T) {
	re := regexp.MustCompile(kernelDecl + kernelBounds + `(\w+)\(`)
	var inSource []string
	for _, m := range re.FindAllStringSubmatch(Source(), -1) {
		inSource = append(inSource, m[1])
	}
	names := append([]string(nil), Names()...)
	sort.Strings(inSource)
	sort.Strings(names)
	if strings.Join(inSource, " ") != strings.Join(names, " ") {
		t.Fatalf("kernels in the source:\n%v\nNames():\n%v", inSource, names)
	}
}

// CompileNotice speaks where Load will compile: no cache directory, a
// cache without the program or with a corrupt file; and says nothing
// where the cache holds a valid one.
func TestCompileNotice(t *testing.T) {
	a := Arch{9, 0}
	if got := CompileNotice("", a); !strings.Contains(got, "compiling the CUDA kernels for sm_90") || !strings.Contains(got, "every run compiles") {
		t.Fatalf("no cache directory: %q", got)
	}
	dir := t.TempDir()
	if got := CompileNotice(dir, a); !strings.Contains(got, "then cached in "+dir) {
		t.Fatalf("empty cache: %q", got)
	}
	if err := writeAtomic(CachePath(dir, a), []byte("\x7fELF not a CUBIN")); err != nil {
		t.Fatal(err)
	}
	if got := CompileNotice(dir, a); got == "" {
		t.Fatal("a corrupt cache file: no notice")
	}
	// Any complete ELF file passes validCUBIN: the test binary is one.
	b := selfELF(t)
	if err := writeAtomic(CachePath(dir, a), CacheFile(copies(b))); err != nil {
		t.Fatal(err)
	}
	if got := CompileNotice(dir, a); got != "" {
		t.Fatalf("a valid cache file: %q", got)
	}
	// Load's compile tells its notice the line before it compiles, and
	// nothing when it reads the program from the cache.
	var told []string
	notice := func(line string) { told = append(told, line) }
	if c, err := compileTelling(nil, a, dir, notice); err != nil || !c.CacheHit || len(told) != 0 {
		t.Fatalf("from the cache: %v, %v, told %q", c, err, told)
	}
	if nv, err := cuda.LoadNVRTC(); err == nil {
		nv.Close()
		return // a real compile would follow: not here
	}
	empty := t.TempDir()
	if _, err := compileTelling(nil, a, empty, notice); err == nil || len(told) != 1 || told[0] != CompileNotice(empty, a) {
		t.Fatalf("a compile without NVRTC: err %v, told %q", err, told)
	}
}

// checkParts fails t unless every kernel of Names is a function symbol of
// exactly one of the parts' CUBINs.
func checkParts(t *testing.T, parts [][]byte) {
	t.Helper()
	in := map[string][]int{}
	for p, b := range parts {
		f, err := parseCUBIN(b)
		if err != nil {
			t.Fatalf("part %d: %v", p, err)
		}
		syms, err := f.Symbols()
		if err != nil {
			t.Fatalf("part %d: %v", p, err)
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				in[s.Name] = append(in[s.Name], p)
			}
		}
	}
	for _, n := range Names() {
		if len(in[n]) != 1 {
			t.Errorf("kernel %s is in parts %v, want one", n, in[n])
		}
	}
}

// The cache file holds ProgramParts CUBINs; anything else is refused.
func TestCacheFile(t *testing.T) {
	elfFile := selfELF(t)
	parts := copies(elfFile)
	b := CacheFile(parts)
	got, ok := parseCacheFile(b)
	if !ok || len(got) != ProgramParts || !bytes.Equal(got[ProgramParts-1], elfFile) {
		t.Fatalf("round trip: %v, %d parts", ok, len(got))
	}
	for name, bad := range map[string][]byte{
		"empty":          nil,
		"no magic":       elfFile,
		"one part short": CacheFile(parts[1:]),
		"one part more":  CacheFile(append(parts, elfFile)),
		"truncated":      b[:len(b)-1],
		"a byte more":    append(append([]byte(nil), b...), 0),
		"a bad part":     CacheFile(append([][]byte{[]byte("\x7fELF not a CUBIN")}, parts[1:]...)),
		"magic only":     []byte(cacheMagic),
		"a length cut":   append([]byte(cacheMagic), 1, 2, 3),
		"a huge length":  append([]byte(cacheMagic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"an empty part":  CacheFile(append([][]byte{nil}, parts[1:]...)),
	} {
		if _, ok := parseCacheFile(bad); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Each part's source defines LC_PART before the program, and the program
// names the three interpreter builds' parts (common.cu's LC_IN_PART).
func TestPartSources(t *testing.T) {
	for p := range ProgramParts {
		if !strings.HasPrefix(partSource(p), fmt.Sprintf("#define LC_PART %d\n// ---- common.cu ----", p)) {
			t.Fatalf("part %d: %.60q", p, partSource(p))
		}
	}
	src := Source()
	for _, want := range []string{"#if LC_IN_PART(1)\nextern \"C\" __global__ void __launch_bounds__(LC_PLAN_THREADS) lc_plan(",
		"#if LC_IN_PART(2)\nextern \"C\" __global__ void __launch_bounds__(LC_PLAN_MID_THREADS)\n    lc_plan_mid(",
		"#if LC_IN_PART(3)\nextern \"C\" __global__ void __launch_bounds__(LC_PLAN_MID_THREADS)\n    lc_plan_serve("} {
		if !strings.Contains(src, want) {
			t.Errorf("the program lacks %q", want)
		}
	}
}

// copies is a program of ProgramParts parts, each b.
func copies(b []byte) [][]byte {
	parts := make([][]byte, ProgramParts)
	for p := range parts {
		parts[p] = b
	}
	return parts
}

// A CUBIN's e_version is CUDA's (124 from NVRTC 12.4), not ELF's 1: it is
// still a valid CUBIN, and a file cut short is not.
func TestValidCUBINCUDAVersion(t *testing.T) {
	b := selfELF(t)
	binary.LittleEndian.PutUint32(b[elfVersionAt:], 124)
	if !validCUBIN(b) {
		t.Fatal("an ELF file with e_version 124 refused")
	}
	if validCUBIN(b[:len(b)/2]) {
		t.Fatal("half of it accepted")
	}
}

// The program compiles with the NVRTC found (none, or a GPU whose tests
// compile it anyway: skipped; .ci/run fetches Debian's NVRTC 12 for this
// test) for sm_90 (the H100 and H200) and sm_80
// (the A100), in its parts, with every kernel in exactly one part and no
// warning of unused kernels.
func TestProgramCompiles(t *testing.T) {
	if _, err := loadEnv(); err == nil {
		t.Skip("a GPU is here: TestCompileCache compiles the program for it and loads it")
	}
	nv, err := cuda.LoadNVRTC()
	if err != nil {
		t.Skip(err)
	}
	defer nv.Close()
	ma, mi := nv.Version()
	for _, a := range []Arch{{9, 0}, {8, 0}} {
		c, err := Compile(nv, a, "")
		if err != nil {
			t.Fatalf("NVRTC %d.%d: %v", ma, mi, err)
		}
		t.Logf("NVRTC %d.%d compiled the program for %s in %v (%d parts)", ma, mi, a, c.Took.Round(time.Millisecond), len(c.Parts))
		checkParts(t, c.Parts)
		if strings.Contains(c.Log, "never referenced") {
			t.Errorf("NVRTC warns of unused kernels for %s:\n%s", a, c.Log)
		} else if c.Log != "" {
			t.Logf("NVRTC's log for %s:\n%s", a, c.Log)
		}
	}
}

// A mistake in the shared source fails every part the same way: said once,
// with the parts it failed; another part's own failure apart.
func TestPartErrors(t *testing.T) {
	same, own := errors.New("k.cu(3): error: x is undefined"), errors.New("k.cu(9): error: y")
	if partErrors([]error{nil, nil, nil, nil}) != nil {
		t.Fatal("no failure, an error")
	}
	err := partErrors([]error{same, errors.New(same.Error()), nil, own})
	want := "parts 0, 1: k.cu(3): error: x is undefined\npart 3: k.cu(9): error: y"
	if err == nil || err.Error() != want || !errors.Is(err, same) || !errors.Is(err, own) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// While one process compiles (it holds the lock beside the cache file),
// another waits, then reads what the first wrote: no compile, no notice.
func TestCompileWaitsForTheLock(t *testing.T) {
	b := selfELF(t)
	a, dir := Arch{9, 0}, t.TempDir()
	unlock, err := lockFile(CachePath(dir, a) + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		c    *Compiled
		err  error
		told []string
	}
	done := make(chan result, 1)
	go func() {
		var told []string
		c, err := compileTelling(nil, a, dir, func(line string) { told = append(told, line) })
		done <- result{c, err, told}
	}()
	select {
	case r := <-done:
		t.Fatalf("compiled while another held the lock: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	if err := writeAtomic(CachePath(dir, a), CacheFile(copies(b))); err != nil {
		t.Fatal(err)
	}
	unlock()
	r := <-done
	if r.err != nil || r.c == nil || !r.c.CacheHit || len(r.told) != 0 {
		t.Fatalf("after the lock: %+v", r)
	}
}

// A program compiled where the cache cannot be written is used all the
// same, with no cache file named, and the notice says why it is not
// cached.
func TestCachedStoreFails(t *testing.T) {
	b := selfELF(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, compiles := Arch{9, 0}, 0
	compile := func() (*Compiled, error) { compiles++; return &Compiled{Parts: copies(b), Arch: a}, nil }
	var told []string
	c, err := cached(compile, a, filepath.Join(file, "kernels"), nil, func(line string) { told = append(told, line) })
	if err != nil || c == nil || c.Path != "" || c.CacheHit || compiles != 1 {
		t.Fatalf("got %+v, %v after %d compiles", c, err, compiles)
	}
	if len(told) != 2 || !strings.HasPrefix(told[0], "compiling the CUDA kernels") || !strings.Contains(told[1], "are not cached") {
		t.Fatalf("told %q", told)
	}
}

// A cached program that did not load is compiled again and stored in its
// place, unless the cache file no longer holds it (another process
// rebuilt it meanwhile): then that file's program is taken.
func TestCachedRebuildsBadProgram(t *testing.T) {
	b := selfELF(t)
	a, dir, compiles := Arch{9, 0}, t.TempDir(), 0
	good := copies(b)
	other := copies(append(append([]byte(nil), b...), 0)) // one byte more: another valid file
	compile := func() (*Compiled, error) { compiles++; return &Compiled{Parts: other, Arch: a}, nil }
	bad := CacheFile(good)
	if err := writeAtomic(CachePath(dir, a), bad); err != nil {
		t.Fatal(err)
	}
	c, err := cached(compile, a, dir, bad, nil)
	if err != nil || c.CacheHit || compiles != 1 || c.Path != CachePath(dir, a) {
		t.Fatalf("rebuild: %+v, %v after %d compiles", c, err, compiles)
	}
	if stored, _ := os.ReadFile(CachePath(dir, a)); !bytes.Equal(stored, CacheFile(other)) {
		t.Fatal("the rebuilt program is not the cache file")
	}
	// The file now holds another program than the bad one: read, not compiled.
	c, err = cached(compile, a, dir, bad, nil)
	if err != nil || !c.CacheHit || compiles != 1 {
		t.Fatalf("after another rebuilt it: %+v, %v after %d compiles", c, err, compiles)
	}
}

// The cache file is readable by every user of the machine, and a
// temporary file left by a process that died long ago goes, while a
// recent one (being written) stays.
func TestWriteAtomicModeAndTemps(t *testing.T) {
	dir := t.TempDir()
	old, fresh := filepath.Join(dir, ".tmp-1.cubin"), filepath.Join(dir, ".tmp-2.cubin")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleTemp)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "k.cubins")
	if err := writeAtomic(path, []byte("data")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("cache file: %v, %v", fi, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the recent temporary file went: %v", err)
	}
}

// selfELF is the test binary's bytes: a complete ELF file, which passes for
// a CUBIN where only the format is checked (skips where it cannot be read).
func selfELF(t *testing.T) []byte {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(self)
	if err != nil || !validCUBIN(b) {
		t.Skipf("the test binary as an ELF file: %v", err)
	}
	return b
}
