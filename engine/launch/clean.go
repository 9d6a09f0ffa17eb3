package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// What a luacoll job may leave on a host when it is killed with SIGKILL,
// and how `luacoll clean` tells what is still in use from what is not.
//
// Windows leave nothing: their memory has no name (shm.HostMemory). Older
// builds named their segments /dev/shm/luacoll-JOB-rR-sS; such a file is
// in use while any process maps it or holds it open. Temporary directories
// are named luacoll-KIND-PID-RANDOM after the process that made them,
// which uses them while it runs: the REPL's control socket (KIND repl)
// and the private MPS control daemon of a job (KIND mps, made by the
// launcher; the daemon outlives a launcher killed with SIGKILL, so
// removing the directory stops the daemon first).

// Leftover is a file or directory of a luacoll job.
type Leftover struct {
	Path string
	Kind string // "segment" or "directory"
	Job  string // the job id, for segments
	PID  int    // the process that made it, for directories
	// InUse says why it must stay ("" when nothing uses it).
	InUse string
}

// tempDirRE matches the names TempDir makes: luacoll-KIND-PID-RANDOM.
var tempDirRE = regexp.MustCompile(`^luacoll-([a-z]+)-([0-9]+)-[^/]+$`)

// legacyNodeRE matches the node directories of older builds,
// luacoll-JOB-nodeK (no launcher in the name).
var legacyNodeRE = regexp.MustCompile(`^` + regexp.QuoteMeta(segmentPrefix) + `[0-9a-f]{16}-node[0-9]+$`)

// segmentRE matches a segment name and captures the job id.
var segmentRE = regexp.MustCompile(`^` + regexp.QuoteMeta(segmentPrefix) + `(.+)-r[0-9]+-s[0-9]+$`)

// TempDir makes a temporary directory for kind (lower-case letters) that
// `luacoll clean` removes once this process is gone.
func TempDir(kind string) (string, error) {
	return os.MkdirTemp("", fmt.Sprintf("luacoll-%s-%d-", kind, os.Getpid()))
}

// FindLeftovers lists the luacoll segments in shmDir and luacoll
// temporary directories in tmpDirs, each with what still uses it.
func FindLeftovers(shmDir string, tmpDirs ...string) ([]Leftover, error) {
	var out []Leftover
	var errs []error
	held := map[string]string{}
	if entries, err := os.ReadDir(shmDir); err == nil {
		var paths []string
		for _, e := range entries {
			m := segmentRE.FindStringSubmatch(e.Name())
			if m == nil || !e.Type().IsRegular() {
				continue
			}
			p := filepath.Join(shmDir, e.Name())
			paths = append(paths, p)
			out = append(out, Leftover{Path: p, Kind: "segment", Job: m[1]})
		}
		if len(paths) > 0 {
			held = holders(paths)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for i := range out {
		out[i].InUse = held[out[i].Path]
	}
	// Logical nodes' directories (--nodes) are in both places.
	dirs, err := findTempDirs(append([]string{shmDir}, tmpDirs...), func(kind string) bool { return true })
	out = append(out, dirs...)
	if err != nil {
		errs = append(errs, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, errors.Join(errs...)
}

// findNodeDirs lists the logical nodes' directories in dirs.
func findNodeDirs(dirs ...string) ([]Leftover, error) {
	return findTempDirs(dirs, func(kind string) bool { return kind == "node" })
}

// findTempDirs lists the directories in dirs named as TempDir names them,
// of the kinds keep accepts (and older builds' node directories when it
// accepts "node"), each with what still uses it.
func findTempDirs(dirs []string, keep func(kind string) bool) ([]Leftover, error) {
	var out, legacy []Leftover
	var errs []error
	seen := map[string]bool{}
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if legacyNodeRE.MatchString(e.Name()) && keep("node") {
				legacy = append(legacy, Leftover{Path: p, Kind: "node directory"})
				continue
			}
			m := tempDirRE.FindStringSubmatch(e.Name())
			if m == nil || !keep(m[1]) {
				continue
			}
			pid, err := strconv.Atoi(m[2])
			if err != nil {
				continue
			}
			l := Leftover{Path: p, Kind: "directory", PID: pid}
			switch m[1] {
			case "mps":
				l.Kind = "MPS directory"
			case "node":
				l.Kind = "node directory"
			}
			if fi, err := e.Info(); err == nil && processSince(pid, fi.ModTime()) {
				l.InUse = fmt.Sprintf("process %d, which made it, is running", pid)
			}
			out = append(out, l)
		}
	}
	if len(legacy) > 0 {
		users := environUsers(legacy)
		for i := range legacy {
			legacy[i].InUse = users[legacy[i].Path]
		}
		out = append(out, legacy...)
	}
	return out, errors.Join(errs...)
}

// environUsers says, for each of ls, which process has its path in its
// environment (a rank of a logical node has its directories there).
func environUsers(ls []Leftover) map[string]string {
	out := map[string]string{}
	procs, _ := os.ReadDir("/proc")
	for _, pe := range procs {
		pid, err := strconv.Atoi(pe.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", pe.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			_, v, _ := strings.Cut(kv, "=")
			for _, l := range ls {
				if v == l.Path && out[v] == "" {
					out[v] = fmt.Sprintf("in the environment of process %d", pid)
				}
			}
		}
	}
	return out
}

// RemoveLeftover removes l, which nothing may use.
func RemoveLeftover(l Leftover) error {
	if l.InUse != "" {
		return fmt.Errorf("%s is in use (%s)", l.Path, l.InUse)
	}
	switch l.Kind {
	case "MPS directory":
		return stopLeftoverMPS(l.Path)
	case "directory", "node directory":
		return os.RemoveAll(l.Path)
	}
	return os.Remove(l.Path)
}

// stopLeftoverMPS stops the MPS control daemon of a job whose launcher is
// gone (as the launcher would have: quit through the control program,
// then SIGKILL to what is left of it) and removes its directory.
func stopLeftoverMPS(dir string) error {
	d := &mpsDaemon{cfg: MPSConfig{Control: MPSControlProgram, Timeout: 3 * time.Second}, dir: dir,
		pipe: filepath.Join(dir, "mps-pipe"), logs: filepath.Join(dir, "mps-log")}
	if p, err := exec.LookPath(MPSControlProgram); err == nil {
		d.cfg.Control = p
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != EnvMPSPipe && k != EnvMPSLog {
			d.env = append(d.env, kv)
		}
	}
	d.env = append(d.env, EnvMPSPipe+"="+d.pipe, EnvMPSLog+"="+d.logs)
	notes := d.stop()
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s: %s", dir, strings.Join(notes, "; "))
	}
	return nil
}

// holders says, for each of paths, which process maps it or holds it
// open (only this user's processes can be seen, and only their files
// removed).
func holders(paths []string) map[string]string {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	out := map[string]string{}
	procs, _ := os.ReadDir("/proc")
	for _, pe := range procs {
		pid, err := strconv.Atoi(pe.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", pe.Name())
		if maps, err := os.ReadFile(filepath.Join(dir, "maps")); err == nil {
			for _, line := range strings.Split(string(maps), "\n") {
				i := strings.IndexByte(line, '/')
				if i < 0 {
					continue
				}
				p := strings.TrimSuffix(line[i:], " (deleted)")
				if want[p] && out[p] == "" {
					out[p] = fmt.Sprintf("mapped by process %d", pid)
				}
			}
		}
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fe := range fds {
			p, err := os.Readlink(filepath.Join(dir, "fd", fe.Name()))
			if err == nil && want[p] && out[p] == "" {
				out[p] = fmt.Sprintf("open in process %d", pid)
			}
		}
	}
	return out
}

// processSince reports whether process pid runs and started no later
// than t (so it may be the one that made something at t; a process with a
// reused pid started after).
func processSince(pid int, t time.Time) bool {
	start, ok := processStart(pid)
	if !ok {
		return false
	}
	// The start is known to a second (the boot time is whole seconds);
	// doubt keeps the directory.
	return !start.After(t.Add(2 * time.Second))
}

// processStart is when process pid started, from /proc.
func processStart(pid int) (time.Time, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, false
	}
	// pid (comm) state ppid ...: field 22 is the start in ticks since boot.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return time.Time{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	boot, ok := bootTime()
	if !ok {
		return time.Time{}, false
	}
	const userHZ = 100 // the tick of every value /proc reports in ticks
	return boot.Add(time.Duration(ticks) * time.Second / userHZ), true
}

// bootTime is when the system booted (btime in /proc/stat).
func bootTime() (time.Time, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(v, 0), true
		}
	}
	return time.Time{}, false
}
