package launch

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer that records every Write as one piece.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

// TestLongLinesStayWhole: a line of several MiB from one rank comes out
// as one line with one prefix while another rank writes short lines.
func TestLongLinesStayWhole(t *testing.T) {
	out := &lockedBuffer{}
	sink := &lineSink{stdout: out, stderr: io.Discard, prefix: true, terminate: true}
	long := strings.Repeat("x", 3<<20)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r, w := io.Pipe()
		go func() {
			// Written in small pieces, as a rank's print may be.
			for i := 0; i < len(long); i += 4096 {
				w.Write([]byte(long[i : i+4096]))
			}
			w.Write([]byte("\n"))
			w.Close()
		}()
		sink.pump(r, 0, false)
	}()
	go func() {
		defer wg.Done()
		sink.pump(strings.NewReader(strings.Repeat("short line\n", 20000)), 1, false)
	}()
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.b.String(), "\n"), "\n")
	whole, want := 0, "[0] "+long
	for _, l := range lines {
		switch {
		case l == want:
			whole++
		case l != "[1] short line":
			t.Fatalf("mangled line of %d bytes starting %q", len(l), l[:min(len(l), 20)])
		}
	}
	if whole != 1 || len(lines) != 20001 {
		t.Fatalf("%d whole long lines, %d lines", whole, len(lines))
	}
}

// TestOverlongLinesAreMarked: past the limit a line is split and its
// later pieces are marked as continuations.
func TestOverlongLinesAreMarked(t *testing.T) {
	out := &lockedBuffer{}
	sink := &lineSink{stdout: out, stderr: io.Discard, prefix: true, terminate: true, maxLine: 100 << 10}
	long := strings.Repeat("y", 250<<10)
	sink.pump(strings.NewReader(long+"\nnext\n"), 2, false)
	lines := strings.Split(strings.TrimSuffix(out.b.String(), "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "[2] y") || lines[len(lines)-1] != "[2] next" {
		t.Fatalf("%d lines", len(lines))
	}
	got := strings.TrimPrefix(lines[0], "[2] ")
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(l, "[2]+ y") {
			t.Fatalf("continuation piece not marked: %.30q", l)
		}
		got += strings.TrimPrefix(l, "[2]+ ")
	}
	if got != long {
		t.Fatalf("pieces do not add up to the line (%d bytes)", len(got))
	}
}

func TestStatStopped(t *testing.T) {
	for stat, want := range map[string]bool{
		"123 (luacoll) T 1 2 3":       true,
		"123 (lua coll) (x)) t 1 2 3": true,
		"123 (luacoll) S 1 2 3":       false,
		"123 (T) R 1":                 false,
		"garbage":                     false,
	} {
		if got := statStopped(stat); got != want {
			t.Errorf("statStopped(%q) = %v", stat, got)
		}
	}
}

// TestLinesEraseTheProgressLine: where rank 0 draws a progress line on
// the terminal, every line of output erases it first, in the same write,
// instead of running on after the bar's text.
func TestLinesEraseTheProgressLine(t *testing.T) {
	out, errs := &lockedBuffer{}, &lockedBuffer{}
	sink := &lineSink{stdout: out, stderr: errs, eraseErr: true}
	sink.pump(strings.NewReader("row 1\nrow 2\n"), 0, false)
	sink.pump(strings.NewReader("warning\n"), 1, true)
	if got := out.b.String(); got != "row 1\nrow 2\n" {
		t.Errorf("stdout (not the terminal) = %q", got)
	}
	if got := errs.b.String(); got != "\r\033[Kwarning\n" || errs.writes != 1 {
		t.Errorf("stderr (the terminal) = %q in %d writes", got, errs.writes)
	}
	out.b.Reset()
	sink = &lineSink{stdout: out, stderr: errs, prefix: true, eraseOut: true}
	sink.pump(strings.NewReader("row\n"), 0, false)
	if got := out.b.String(); got != "\r\033[K[0] row\n" {
		t.Errorf("prefixed stdout on the terminal = %q", got)
	}
}
