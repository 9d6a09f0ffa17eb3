package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// A collective call that a rank refuses on its own (a bad argument, a
// freed object, a call on the wrong receiver) must still take part in the
// exchange the other ranks are in: otherwise their call pairs with this
// rank's next collective and returns wrong data, and the sequence numbers
// drift apart for good. Every entry whose doc starts with "**collective**"
// gets this rule from fn; entries that synchronize otherwise (ag:exec) set
// their own refusal.

// collectiveMark is how a collective entry's doc begins.
const collectiveMark = "**collective**"

// refusal says how a collective entry takes part in a call it refused:
// count returns a number the call's exchange advances (unchanged after the
// call: it never reached the exchange), join takes part marked failed.
type refusal struct {
	count func(c *call) uint64
	join  func(c *call, reason string)
}

// exchangeRefusal is the rule of the entries whose exchange is a
// Comm collective.
func exchangeRefusal(name string) *refusal {
	return &refusal{
		count: func(c *call) uint64 { return uint64(c.s.Comm.Collectives()) },
		join: func(c *call, reason string) {
			// The others raise with reason; this rank raises its own error
			// (the one it refused with), whatever this returns.
			_ = c.s.Comm.JoinRefused(c.ctx(), name, reason)
		},
	}
}

// isCollective reports whether doc marks a collective entry.
func isCollective(doc string) bool { return strings.HasPrefix(doc, collectiveMark) }

// refuseOnRaise is deferred by a collective entry's call around its whole
// body (receiver and argument checks included): when the body raises
// before the call reached its exchange (before is the count on entry),
// the call takes part marked failed, and the error goes on up.
func (c *call) refuseOnRaise(r *refusal, before uint64, raised any) {
	if r.count(c) != before {
		return
	}
	r.join(c, raisedText(raised))
}

// raisedText is the message of a Lua error (or other panic) in flight.
func raisedText(p any) string {
	if ae, ok := p.(*lua.ApiError); ok && ae.Object != nil {
		return strings.TrimSpace(ae.Object.String())
	}
	return fmt.Sprint(p)
}
