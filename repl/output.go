package repl

import (
	"fmt"
	"io"
	"strings"
)

// The session's output: the ANSI colours of rank labels, errors and
// notices (with cfg.Color), answers grouped by rank, and notices.
const (
	colorRank   = "\x1b[36m"
	colorErr    = "\x1b[31m"
	colorNotice = "\x1b[33m"
	colorOff    = "\x1b[0m"
)

func (s *session) paint(color, text string) string {
	if !s.cfg.Color {
		return text
	}
	return color + text + colorOff
}

func (s *session) printGroups(gs []group) {
	var b strings.Builder
	for _, g := range gs {
		prefix := s.paint(colorRank, "["+formatRanks(g.ranks)+"]")
		for _, l := range g.lines {
			text := l.text
			if l.isErr {
				text = s.paint(colorErr, text)
			}
			b.WriteString(prefix)
			if text != "" {
				b.WriteByte(' ')
				b.WriteString(text)
			}
			b.WriteByte('\n')
		}
	}
	_, _ = io.WriteString(s.out, b.String())
}

// notice prints a message of the session itself.
func (s *session) notice(format string, a ...any) {
	_, _ = io.WriteString(s.out, s.paint(colorNotice, fmt.Sprintf(format, a...))+"\n")
}

// errorf prints an error of the session itself (a bad command).
func (s *session) errorf(format string, a ...any) {
	s.failed = true
	_, _ = io.WriteString(s.out, s.paint(colorErr, "error: "+fmt.Sprintf(format, a...))+"\n")
}

func (s *session) info(format string, a ...any) {
	_, _ = io.WriteString(s.out, fmt.Sprintf(format, a...)+"\n")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
