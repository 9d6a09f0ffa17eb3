package repl

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// kill ends ranks that do not stop (by their process group).
func (s *session) kill(ranks map[int]bool) {
	for r := range ranks {
		rs := s.ranks[r]
		if !rs.alive.Load() || rs.pid <= 0 {
			continue
		}
		rs.killed = true
		s.markKilled(r)
		if err := unix.Kill(-rs.pid, unix.SIGKILL); err != nil {
			_ = unix.Kill(rs.pid, unix.SIGKILL)
		}
	}
}

// markKilled notes that the session kills rank r with a signal.
func (s *session) markKilled(r int) {
	if r >= 0 && r < len(s.killedRanks) {
		s.killedRanks[r].Store(true)
	}
}

// reportDeaths says which ranks died since the last report, and what
// still works.
func (s *session) reportDeaths() {
	if len(s.deaths) == 0 {
		return
	}
	dead := s.deaths
	s.deaths = nil
	s.failed = true
	sort.Ints(dead)
	var parts []string
	for _, r := range dead {
		parts = append(parts, fmt.Sprintf("rank %d died (%s)", r, s.ranks[r].deathReason()))
	}
	msg := strings.Join(parts, "; ")
	alive := s.alive()
	if len(alive) == 0 {
		s.notice("%s; no rank is alive: :quit ends the session", msg)
		return
	}
	msg += fmt.Sprintf("; %s %s %s alive", plural(len(alive), "rank", "ranks"), formatRanks(alive),
		plural(len(alive), "is", "are"))
	if s.allAborted(alive) {
		msg += "; collectives and window waits now fail on every rank, local Lua still works"
	}
	s.notice("%s", msg)
}

// allAborted asks the ranks whether they have seen the job abort (they
// wait a little for the news).
func (s *session) allAborted(ranks []int) bool {
	s.nextID++
	id := s.nextID
	pending := map[int]bool{}
	for _, r := range ranks {
		if s.ranks[r].c.send(&message{Type: msgStatus, ID: id}) == nil {
			pending[r] = true
		}
	}
	all := true
	timer := time.NewTimer(statusWait)
	defer timer.Stop()
	for len(pending) > 0 {
		select {
		case ev := <-s.events:
			s.handle(ev)
			if !pending[ev.rank] {
				continue
			}
			if ev.closed {
				delete(pending, ev.rank)
			} else if ev.msg.Type == msgStatus && ev.msg.ID == id {
				if ev.msg.Aborted == "" {
					all = false
				}
				delete(pending, ev.rank)
			}
		case o := <-s.launchC:
			s.launchC, s.launched = nil, &o
		case <-timer.C:
			return false
		}
	}
	return all
}

// stop ends the ranks: goodbye first (when graceful), then SIGINT, then
// SIGKILL; then it removes the control socket.
func (s *session) stop(graceful bool) {
	if s.cancelLaunch != nil && s.launched == nil {
		if graceful {
			for _, rs := range s.ranks {
				if rs != nil && rs.alive.Load() {
					_ = rs.c.send(&message{Type: msgQuit})
				}
			}
		}
		if !graceful || !s.waitLaunch(s.cfg.Timeout+quitSlack) {
			s.cancelLaunch()
			if !s.waitLaunch(stopWait) {
				for _, rs := range s.ranks {
					if rs != nil && rs.alive.Load() && rs.pid > 0 {
						s.markKilled(rs.rank)
						_ = unix.Kill(-rs.pid, unix.SIGKILL)
					}
				}
				s.waitLaunch(stopWait)
			}
		}
	}
	if s.cancelLaunch != nil {
		s.cancelLaunch()
		if s.cfg.MPS != nil {
			// The launcher stops the session's MPS daemon once the ranks
			// are gone: wait for it, or the daemon outlives us.
			s.waitLaunch(mpsStopWait)
		}
	}
	close(s.done)
	for _, rs := range s.ranks {
		if rs != nil {
			_ = rs.c.close()
		}
	}
	if s.ln != nil {
		_ = s.ln.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// waitLaunch waits up to d for every rank to exit.
func (s *session) waitLaunch(d time.Duration) bool {
	if s.launched != nil {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case o := <-s.launchC:
			s.launchC, s.launched = nil, &o
			return true
		case ev := <-s.events:
			if ev.closed && ev.rank < len(s.ranks) && s.ranks[ev.rank] != nil {
				s.ranks[ev.rank].alive.Store(false)
			}
		case <-timer.C:
			return false
		}
	}
}
