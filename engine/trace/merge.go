package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// EnvDir names the directory where a rank started by luacoll's launcher
// writes its part of the trace (PartPath); the launcher merges them.
const EnvDir = "LUACOLL_TRACE_DIR"

// PartPath is the part file of rank in dir.
func PartPath(dir string, rank int) string {
	return filepath.Join(dir, "rank-"+strconv.Itoa(rank)+".json")
}

// maxLine bounds one event's line in a part file.
const maxLine = 16 << 20

// Part is what was read of one rank's part file.
type Part struct {
	Rank   int
	Events [][]byte // one JSON object each
	// End is the job time of the end of the rank's last event.
	End time.Duration
	// Torn counts lines that were not whole events (a rank killed while
	// writing leaves at most one).
	Torn int
}

// ReadPart reads a part file: "[" and one event a line, each followed by a
// comma, the array left open.
func ReadPart(r io.Reader, rank int) (Part, error) {
	p := Part{Rank: rank}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		line = bytes.TrimSuffix(line, []byte(","))
		if len(line) == 0 || bytes.Equal(line, []byte("[")) || bytes.Equal(line, []byte("]")) {
			continue
		}
		var ev struct {
			Ph  string   `json:"ph"`
			TS  *float64 `json:"ts"`
			Dur float64  `json:"dur"`
		}
		if !json.Valid(line) || json.Unmarshal(line, &ev) != nil || ev.TS == nil {
			p.Torn++
			continue
		}
		if ev.Ph != PhaseMeta {
			end := time.Duration(math.Round((*ev.TS + ev.Dur) * 1e3))
			p.End = max(p.End, end)
		}
		p.Events = append(p.Events, append([]byte(nil), line...))
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("trace: rank %d's part: %w", rank, err)
	}
	return p, nil
}

// Exit is how a rank ended, as its launcher saw it.
type Exit struct {
	Rank   int
	Status string // e.g. "exit status 1", "killed by signal 9"; "" for success
}

// Summary describes a merged trace.
type Summary struct {
	Ranks   int   // ranks with a part
	Missing []int // ranks without one (Job.Finish)
	Events  int
}

// Write writes the merged trace: every part's events in rank order, an
// instant for each rank that did not exit cleanly (after its last event),
// and the format's header.
func Write(w io.Writer, parts []Part, exits []Exit) (Summary, error) {
	var s Summary
	bw := bufio.NewWriter(w)
	_, _ = bw.WriteString(`{"displayTimeUnit":"ns","otherData":{"producer":"luacoll","clock":"job time: rank 0's clock since the job started"},"traceEvents":[`)
	first := true
	put := func(line []byte) {
		if !first {
			_ = bw.WriteByte(',')
		}
		first = false
		_ = bw.WriteByte('\n')
		_, _ = bw.Write(line)
		s.Events++
	}
	end := map[int]time.Duration{}
	for _, p := range parts {
		s.Ranks++
		for _, ev := range p.Events {
			put(ev)
		}
		end[p.Rank] = p.End
	}
	for _, x := range exits {
		if x.Status == "" {
			continue
		}
		at, ok := end[x.Rank]
		if !ok {
			put(appendEvent(nil, x.Rank, &event{name: "process_name", ph: PhaseMeta,
				args: []arg{{"name", fmt.Sprintf("rank %d (recorded nothing)", x.Rank)}}}))
		}
		put(appendEvent(nil, x.Rank, &event{name: "exit", cat: "error", ph: PhaseInstant, ts: at, tid: TIDHost, scope: "p",
			args: []arg{{"status", x.Status}, {"note", "seen by the launcher; placed at the rank's last event"}}}))
	}
	_, _ = bw.WriteString("\n]}\n")
	return s, bw.Flush()
}

// Job is the launcher's side of a traced job: a directory for the ranks'
// parts, and the file they are merged into.
type Job struct {
	path string
	dir  string
	n    int
}

// NewJob prepares a trace of n ranks into path. The parts' directory is
// named luacoll-trace-PID-*, as the launcher's temporary directories are,
// so that `luacoll clean` removes it once this process is gone (killed
// before it could).
func NewJob(path string, n int) (*Job, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("luacoll-trace-%d-", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return &Job{path: path, dir: dir, n: n}, nil
}

// Dir is where the ranks write their parts (give it to them in EnvDir).
func (j *Job) Dir() string { return j.dir }

// Env is what a rank's environment needs.
func (j *Job) Env() []string { return []string{EnvDir + "=" + j.dir} }

// Finish merges the parts into the job's file and removes them. exits
// (may be nil) says how each rank ended.
func (j *Job) Finish(exits []Exit) (Summary, error) {
	defer os.RemoveAll(j.dir)
	parts, missing, err := ReadParts(j.dir, j.n)
	if err != nil {
		return Summary{}, err
	}
	s, err := WriteFile(j.path, parts, exits)
	s.Missing = missing
	return s, err
}

// ReadParts reads the parts of ranks 0..n-1 in dir; ranks without one are
// returned as missing.
func ReadParts(dir string, n int) (parts []Part, missing []int, err error) {
	for r := range n {
		f, err := os.Open(PartPath(dir, r))
		if errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, r)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("trace: %w", err)
		}
		p, err := ReadPart(f, r)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		parts = append(parts, p)
	}
	return parts, missing, nil
}

// WriteFile writes the merged trace into path: through a temporary file
// next to it, renamed when complete, where path is a regular file or
// none; a symbolic link's target is written so; anything else there (a
// device, a pipe) is opened and written in place, never replaced.
func WriteFile(path string, parts []Part, exits []Exit) (Summary, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return Summary{}, fmt.Errorf("trace: %s is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return Summary{}, fmt.Errorf("trace: %w", err)
		}
		s, err := Write(f, parts, exits)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return s, fmt.Errorf("trace: writing %s: %w", path, err)
		}
		return s, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".luacoll-trace-*")
	if err != nil {
		return Summary{}, fmt.Errorf("trace: %w", err)
	}
	s, err := Write(tmp, parts, exits)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return s, fmt.Errorf("trace: writing %s: %w", path, err)
	}
	return s, nil
}
