package luabind

import "github.com/luacoll/luacoll/transport"

// streamCheckCalls is how many calls of registered functions go by
// between two looks at whether the rank's stream failed.
const streamCheckCalls = 1024

// checkStream raises, every streamCheckCalls calls, the error of an
// operation of the rank's stream that failed since the last sync (as the
// next sync would): a long eager loop (a million puts and waits) then
// stops soon after its first failed wait instead of enqueueing the rest,
// which the stream would only skip. Interrupts and the job's abort end
// such loops through the interpreter's context.
func (s *State) checkStream(c *call) {
	s.calls++
	if s.calls%streamCheckCalls != 0 || s.Comm == nil || s.Comm.Rank == nil {
		return
	}
	if f, ok := s.Comm.Rank.Stream.(transport.Failer); ok && f.Failed() != nil {
		c.check(s.Comm.Rank.Stopped())
	}
}
