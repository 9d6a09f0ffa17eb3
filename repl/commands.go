package repl

import (
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/luabind"
)

// commandHelp is what :help prints.
const commandHelp = `Commands (a line that starts with a colon):
  :on LIST     run the next chunks on these ranks only, e.g. :on 0,2 or :on 1-3
               (collectives need every rank: there they are refused)
  :all         run chunks on every rank again
  :load FILE [ARGS...]
               run a Lua file (or an embedded script, e.g. examples/tour.lua) on those
               ranks, with ARGS in arg and ... ("quoted words" are one argument)
  :ranks       show which ranks are alive and where chunks run
  :help        this list
  :quit        end the session (also Ctrl-D, or the end of the input)
Anything else is Lua, run on every chosen rank: a bare expression prints its
values, an unfinished chunk continues on the next line (>>), help() lists the
API and help("w:put") shows one entry; lc is the luacoll module. Answers come
back by rank, identical ones once ("[0-3] 42"). Ctrl-C interrupts a running
chunk on every rank. Ctrl-\ (SIGQUIT) shows where a stuck chunk is: each rank
prints its Lua traceback and the wait it was in, writes its Go stacks to a file
it names and exits, and the session ends (exit status 1).`

// commandNames are completed after a colon.
func commandNames() []string {
	return []string{":all", ":help", ":load ", ":on ", ":quit", ":ranks"}
}

// command runs a colon command; it reports whether the session ends.
func (s *session) command(text string) (quit bool) {
	name, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case ":quit", ":q", ":exit":
		return true
	case ":help", ":h", ":?":
		s.info("%s", commandHelp)
	case ":on":
		if arg == "" {
			s.info("%s", s.targetSummary())
			return false
		}
		ranks, err := parseRanks(arg, len(s.ranks))
		if err != nil {
			s.errorf(":on: %v", err)
			return false
		}
		s.targets = ranks
		s.info("%s", s.targetSummary())
	case ":all":
		s.targets = nil
		s.info("%s", s.targetSummary())
	case ":ranks":
		s.poll()
		for _, rs := range s.ranks {
			if rs.alive.Load() {
				s.info("rank %d: alive (%s)", rs.rank, rs.device)
			} else {
				s.info("rank %d: died (%s)", rs.rank, rs.deathReason())
			}
		}
		s.info("%s", s.targetSummary())
	case ":load":
		words, err := splitArgs(arg)
		if err != nil {
			s.errorf(":load: %v", err)
			return false
		}
		if len(words) == 0 {
			s.errorf(":load: which file? e.g. :load script.lua arg1 arg2")
			return false
		}
		src, chunkName, err := luabind.LoadScript(words[0])
		if err != nil {
			s.errorf(":load: %v", err)
			return false
		}
		s.run(Chunk{Code: string(src), Name: chunkName, Script: true, Args: words[1:]})
	default:
		s.errorf("unknown command %s; :help lists the commands", name)
	}
	return false
}

// targetSummary says where chunks run.
func (s *session) targetSummary() string {
	alive := s.alive()
	if s.targets == nil {
		if len(alive) == len(s.ranks) {
			return fmt.Sprintf("chunks run on every rank (%s)", formatRanks(alive))
		}
		if len(alive) == 0 {
			return "chunks run on no rank: none is alive"
		}
		return fmt.Sprintf("chunks run on every alive rank (%s)", formatRanks(alive))
	}
	on := s.runOn()
	msg := fmt.Sprintf("chunks run on %s %s", plural(len(s.targets), "rank", "ranks"), formatRanks(s.targets))
	if len(on) < len(s.targets) {
		var dead []int
		for _, r := range s.targets {
			if !s.ranks[r].alive.Load() {
				dead = append(dead, r)
			}
		}
		msg += fmt.Sprintf(" (%s %s dead)", formatRanks(dead), plural(len(dead), "is", "are"))
	}
	return msg
}

// aliveSummary is said when no chosen rank is alive.
func (s *session) aliveSummary() string {
	alive := s.alive()
	if len(alive) == 0 {
		return "no rank is alive (:quit ends the session)"
	}
	return fmt.Sprintf("the chosen ranks are dead; %s %s %s alive (:all or :on to choose)",
		plural(len(alive), "rank", "ranks"), formatRanks(alive), plural(len(alive), "is", "are"))
}

// splitArgs splits a command's arguments at spaces, as a shell would for
// plain words: "double" or 'single' quotes make one word of what they
// hold (a backslash in double quotes takes the next character as it is).
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '"' || ch == '\'':
			inWord = true
			j := i + 1
			for ; j < len(s) && s[j] != ch; j++ {
				if ch == '"' && s[j] == '\\' && j+1 < len(s) {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("unclosed %c in %q", ch, s)
			}
			i = j
		default:
			inWord = true
			cur.WriteByte(ch)
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
