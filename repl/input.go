package repl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ergochat/readline"

	"github.com/luacoll/luacoll/luabind"
)

// lineSource gives the session its input a line at a time.
type lineSource interface {
	// next returns the next line without its newline: io.EOF at the end
	// (Ctrl-D, end of input, the session stopping), errPromptInterrupt
	// for Ctrl-C at a terminal's prompt.
	next(prompt string) (string, error)
	close()
}

func (s *session) newSource() (lineSource, error) {
	if !s.cfg.Terminal {
		return newPipeSource(s), nil
	}
	rl, err := readline.NewFromConfig(&readline.Config{
		Prompt:       "> ",
		HistoryFile:  s.cfg.HistoryFile,
		HistoryLimit: 1000,
		AutoComplete: &completer{s: s},
		Stdin:        s.cfg.Stdin,
		Stdout:       s.cfg.Stdout,
		Stderr:       s.cfg.Stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("line editor: %w", err)
	}
	t := &termSource{s: s, rl: rl}
	// What the session prints while a line is being edited (a rank's
	// death) goes above the prompt, which is drawn again.
	s.out = rl.Stdout()
	s.rankOut.set(rl.Stdout())
	s.rankErr.set(rl.Stderr())
	// A SIGTERM or the end of the session's context wakes a pending read.
	go func() {
		select {
		case <-s.ctx.Done():
			_ = rl.Close()
		case <-s.done:
		}
	}()
	return t, nil
}

// pipeSource reads lines from a non-terminal stdin. Ctrl-C while it waits
// ends the session.
type pipeSource struct {
	s     *session
	lines chan string
}

func newPipeSource(s *session) *pipeSource {
	p := &pipeSource{s: s, lines: make(chan string)}
	go func() {
		defer close(p.lines)
		br := bufio.NewReaderSize(s.cfg.Stdin, 64<<10)
		for {
			l, err := br.ReadString('\n')
			if l != "" || err == nil {
				l = strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")
				select {
				case p.lines <- l:
				case <-s.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *pipeSource) next(string) (string, error) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); p.s.watch(stop) }()
	defer func() { close(stop); <-done }()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", io.EOF
		}
		return l, nil
	case <-p.s.sigint:
		return "", io.EOF
	case <-p.s.ctx.Done():
		return "", io.EOF
	}
}

func (p *pipeSource) close() {}

// termSource reads lines with line editing, completion and history.
type termSource struct {
	s  *session
	rl *readline.Instance
}

func (t *termSource) next(prompt string) (string, error) {
	t.s.drainSignals()
	t.rl.SetPrompt(prompt)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); t.s.watch(stop) }()
	l, err := t.rl.ReadLine()
	close(stop)
	<-done
	switch {
	case errors.Is(err, readline.ErrInterrupt):
		return "", errPromptInterrupt
	case err != nil:
		return "", io.EOF
	}
	return l, nil
}

func (t *termSource) close() { _ = t.rl.Close() }

// completer completes Lua names (asking a rank, which knows the session's
// globals) and colon commands.
type completer struct{ s *session }

// Do implements readline.AutoCompleter: the candidates' remainders after
// the word at the cursor, and how many runes of it they share.
func (c *completer) Do(line []rune, pos int) ([][]rune, int) {
	if pos > len(line) {
		pos = len(line)
	}
	text := string(line[:pos])
	if t := strings.TrimLeft(text, " \t"); strings.HasPrefix(t, ":") {
		return completeCommand(t)
	}
	start := len(text)
	for start > 0 && isWordByte(text[start-1]) {
		start--
	}
	word := text[start:]
	if word == "" {
		return nil, 0
	}
	seg := word[strings.LastIndexAny(word, ".:")+1:]
	var out [][]rune
	for _, cand := range c.s.complete(word) {
		if strings.HasPrefix(cand, word) {
			out = append(out, []rune(cand[len(word):]))
		}
	}
	return out, utf8.RuneCountInString(seg)
}

func isWordByte(b byte) bool {
	return b == '_' || b == '.' || b == ':' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// complete asks the first alive rank, and falls back on the session's own
// state (standard library and registry only).
func (s *session) complete(word string) []string {
	for _, rs := range s.ranks {
		if !rs.alive.Load() {
			continue
		}
		if cands, ok := s.askComplete(rs, word); ok {
			return cands
		}
		break
	}
	return luabind.CompleteIn(s.local, s.reg, word)
}

func (s *session) askComplete(rs *rankState, word string) ([]string, bool) {
	id := s.complID.Add(1)
	if err := rs.c.send(&message{Type: msgComplete, ID: id, Word: word}); err != nil {
		return nil, false
	}
	timer := time.NewTimer(completeWait)
	defer timer.Stop()
	for {
		select {
		case m := <-s.completions:
			if m.ID == id {
				return m.Candidates, true
			}
		case <-timer.C:
			return nil, false
		}
	}
}

// completeCommand completes a colon command, and the file of :load.
func completeCommand(text string) ([][]rune, int) {
	if rest, ok := strings.CutPrefix(text, ":load "); ok {
		return completeFile(strings.TrimLeft(rest, " "))
	}
	if strings.Contains(text, " ") {
		return nil, 0
	}
	var out [][]rune
	for _, n := range commandNames() {
		if strings.HasPrefix(n, text) {
			out = append(out, []rune(n[len(text):]))
		}
	}
	return out, utf8.RuneCountInString(text)
}

// completeFile completes a path: directories get a slash, files show
// only when they end in .lua.
func completeFile(prefix string) ([][]rune, int) {
	dir, base := filepath.Split(prefix)
	readDir := dir
	if readDir == "" {
		readDir = "."
	}
	entries, err := os.ReadDir(readDir)
	if err != nil {
		return nil, 0
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, base) || (strings.HasPrefix(n, ".") && !strings.HasPrefix(base, ".")) {
			continue
		}
		switch {
		case e.IsDir():
			names = append(names, n+"/")
		case strings.HasSuffix(n, ".lua"):
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([][]rune, 0, len(names))
	for _, n := range names {
		out = append(out, []rune(n[len(base):]))
	}
	return out, utf8.RuneCountInString(base)
}
