package kernels

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/luacoll/luacoll/cuda"
)

// The program is compiled in parts, in parallel: each part is an NVRTC
// program of the whole source with LC_PART defined (common.cu). ptxas
// spends nearly all of a compile on the plan interpreter's three builds
// (lc_plan, lc_plan_mid, lc_plan_serve), so each is a part of its own, and
// part 0 holds every other kernel. Once loaded, each part is a module of
// its own; no kernel is in two, and the kernels share no device variables
// (the program defines none), so which module holds a kernel is all that
// the split changes. ProgramParts is how many parts there are.
const ProgramParts = 4

// partSource is the program text of part p.
func partSource(p int) string { return fmt.Sprintf("#define LC_PART %d\n", p) + Source() }

// cacheMagic begins a cache file; then, for each part, its length (8
// bytes, little endian) and its CUBIN.
const cacheMagic = "lcparts1"

// CacheFile returns the bytes of a cache file holding a program of these
// parts (CUBINs, part 0 first), as Load writes and reads it.
func CacheFile(parts [][]byte) []byte {
	b := []byte(cacheMagic)
	for _, p := range parts {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// parseCacheFile returns the parts of a cache file, or false unless it
// holds ProgramParts complete CUBINs and nothing else.
func parseCacheFile(b []byte) ([][]byte, bool) {
	if !bytes.HasPrefix(b, []byte(cacheMagic)) {
		return nil, false
	}
	b = b[len(cacheMagic):]
	var parts [][]byte
	for len(b) > 0 {
		if len(b) < 8 || len(parts) == ProgramParts {
			return nil, false
		}
		n := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if n > uint64(len(b)) || !validCUBIN(b[:n]) {
			return nil, false
		}
		parts = append(parts, b[:n:n])
		b = b[n:]
	}
	return parts, len(parts) == ProgramParts
}

// compileParts compiles every part for a with nv, at once.
func compileParts(nv *cuda.NVRTC, a Arch) (*Compiled, error) {
	parts := make([][]byte, ProgramParts)
	logs := make([]string, ProgramParts)
	errs := make([]error, ProgramParts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One name for every part: a mistake in the shared source
			// then fails each part with the same message, said once.
			cubin, log, err := nv.CompileCUBIN(partSource(p), "luacoll_kernels.cu", CompileOptions(a))
			if err == nil && !validCUBIN(cubin) {
				err = fmt.Errorf("NVRTC returned %d bytes that are not an ELF CUBIN", len(cubin))
			}
			parts[p], errs[p] = cubin, err
			if log != "" {
				logs[p] = fmt.Sprintf("part %d: %s", p, log)
			}
		}()
	}
	wg.Wait()
	if err := partErrors(errs); err != nil {
		return nil, fmt.Errorf("compile luacoll kernels for %s: %w", a, err)
	}
	var log []string
	for _, l := range logs {
		if l != "" {
			log = append(log, l)
		}
	}
	return &Compiled{Parts: parts, Arch: a, Log: strings.Join(log, "\n")}, nil
}

// partErrors joins the parts' errors, each message once with the parts
// that failed with it; nil when none failed.
func partErrors(errs []error) error {
	var order []string
	by := map[string][]int{}
	first := map[string]error{}
	for p, err := range errs {
		if err == nil {
			continue
		}
		m := err.Error()
		if by[m] == nil {
			order = append(order, m)
			first[m] = err
		}
		by[m] = append(by[m], p)
	}
	var out []error
	for _, m := range order {
		ps := by[m]
		names := make([]string, len(ps))
		for i, p := range ps {
			names[i] = strconv.Itoa(p)
		}
		what := "part " + names[0]
		if len(ps) > 1 {
			what = "parts " + strings.Join(names, ", ")
		}
		out = append(out, fmt.Errorf("%s: %w", what, first[m]))
	}
	return errors.Join(out...)
}

// loadParts loads every part of c as a module of the current context.
func loadParts(drv *cuda.Driver, c *Compiled) ([]*cuda.Module, error) {
	var mods []*cuda.Module
	for p, b := range c.Parts {
		m, err := drv.ModuleLoadData(b)
		if err != nil {
			for _, m := range mods {
				_ = m.Unload()
			}
			return nil, fmt.Errorf("part %d: %w", p, err)
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// lookup finds kernel name in the part that holds it; a part that does not
// hold it says so with CUDA_ERROR_NOT_FOUND, and any other failure is
// the lookup's.
func lookup(mods []*cuda.Module, name string) (*cuda.Function, error) {
	err := errors.New("no module loaded")
	for p, m := range mods {
		f, e := m.Function(name)
		if e == nil {
			return f, nil
		}
		if !errors.Is(e, &cuda.Error{Code: cuda.ErrorNotFound}) {
			return nil, fmt.Errorf("part %d: %w", p, e)
		}
		err = e
	}
	return nil, err
}
