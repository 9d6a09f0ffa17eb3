package launch

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/term"
)

// ProgressFile returns where this process should draw progress lines: the
// descriptor luacoll's launcher handed over (LaunchConfig.Progress; only a
// process that launcher started, with EnvRank set, takes it), else
// fallback when that is a terminal, else nil (no progress).
func ProgressFile(getenv func(string) string, fallback *os.File) *os.File {
	if fd, err := strconv.Atoi(getenv(EnvProgressFD)); err == nil && fd > 2 && getenv(EnvRank) != "" {
		syscall.CloseOnExec(fd) // not for whatever the rank starts
		if f := os.NewFile(uintptr(fd), "progress"); f != nil {
			return f
		}
	}
	if IsTerminal(fallback) {
		return fallback
	}
	return nil
}

// IsTerminal reports whether f is a terminal (not merely a character
// device: /dev/null is one too).
func IsTerminal(f *os.File) bool {
	return f != nil && term.IsTerminal(int(f.Fd()))
}

// lineSink writes the ranks' output whole line by whole line.
type lineSink struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	prefix         bool // write "[rank] " before each line
	terminate      bool // end a partial last line with a newline
	maxLine        int  // longest line kept whole (0: maxOutputLine)
	// eraseOut, eraseErr: that stream is the terminal a progress line is
	// drawn on; each line starts by erasing it.
	eraseOut, eraseErr bool
	// outClosed, when set, is called once a write to stdout finds its
	// reader gone (EPIPE: `luacoll run ... | head -1`).
	outClosed     func()
	outClosedOnce sync.Once
}

// write writes b to w, noting a closed standard output.
func (s *lineSink) write(w io.Writer, b []byte) {
	if _, err := w.Write(b); err != nil && w == s.stdout && s.outClosed != nil && errors.Is(err, syscall.EPIPE) {
		s.outClosedOnce.Do(s.outClosed)
	}
}

// eraseLine is the terminal's "to the line's start, erase it".
const eraseLine = "\r\033[K"

// pump copies r to the sink line by line until r ends.
func (s *lineSink) pump(r io.Reader, rank int, toErr bool) {
	br := bufio.NewReaderSize(r, lineReadBuf)
	var pending []byte
	cont := false // pending continues a line split before
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(pending) > 0 || cont {
				pending = append(pending, chunk...)
				s.piece(rank, toErr, pending, cont)
				pending, cont = pending[:0], false
			} else {
				s.line(rank, toErr, chunk)
			}
		case errors.Is(err, bufio.ErrBufferFull):
			// A line is written whole, with one Write, so no other rank's
			// line lands inside it; only one beyond maxOutputLine is split,
			// and its later pieces are marked "[rank]+ ".
			pending = append(pending, chunk...)
			if len(pending) >= s.maxLineOr() {
				s.piece(rank, toErr, append(pending, '\n'), cont)
				pending, cont = pending[:0], true
			}
		default:
			pending = append(pending, chunk...)
			if len(pending) > 0 {
				if s.terminate {
					pending = append(pending, '\n')
				}
				s.piece(rank, toErr, pending, cont)
			}
			return
		}
	}
}

func (s *lineSink) maxLineOr() int {
	if s.maxLine > 0 {
		return s.maxLine
	}
	return maxOutputLine
}

// line writes one line (newline included) with a single Write.
func (s *lineSink) line(rank int, toErr bool, line []byte) { s.piece(rank, toErr, line, false) }

// piece is line for a piece of a split line: cont marks one that continues
// the previous piece ("[rank]+ ").
func (s *lineSink) piece(rank int, toErr bool, line []byte, cont bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, erase := s.stdout, s.eraseOut
	if toErr {
		w, erase = s.stderr, s.eraseErr
	}
	if !s.prefix && !erase {
		s.write(w, line)
		return
	}
	buf := make([]byte, 0, len(line)+16)
	if erase {
		buf = append(buf, eraseLine...)
	}
	if !s.prefix {
		s.write(w, append(buf, line...))
		return
	}
	buf = append(buf, '[')
	buf = strconv.AppendInt(buf, int64(rank), 10)
	if cont {
		buf = append(buf, ']', '+', ' ')
	} else {
		buf = append(buf, "] "...)
	}
	buf = append(buf, line...)
	s.write(w, buf)
}

// note writes a launcher message to the error stream.
func (s *lineSink) note(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.stderr, msg+"\n")
}
