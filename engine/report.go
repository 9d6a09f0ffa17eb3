package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// IsTimeout reports whether err is a wait or a bootstrap call that ran out
// of time (rather than one another rank's failure ended).
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	var re *bootstrap.RankError
	if errors.As(err, &re) {
		return false // another rank's failure, whatever it was
	}
	var we *window.WaitError
	if errors.As(err, &we) && we.Cause == nil && strings.HasPrefix(we.Msg, "timed out") {
		return true
	}
	var te *bootstrap.TimeoutError
	return errors.As(err, &te) || errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// TimeoutHint is the line said after a timeout: which flag sets it, and
// its value in this run; "" for any other error, and for a wait whose
// window set its own time (timeout_ms) rather than the job's.
func TimeoutHint(err error, timeout time.Duration) string {
	if !IsTimeout(err) {
		return ""
	}
	var we *window.WaitError
	if errors.As(err, &we) && !strings.HasPrefix(we.Msg, "timed out after "+timeout.String()) {
		return ""
	}
	return fmt.Sprintf("hint: waits and bootstrap calls give up after --timeout (%v in this run); a busy machine or a large size may need more, e.g. --timeout %v", timeout, 3*timeout)
}

// OtherRanksFailure returns the rank whose failure ended this rank's
// work with err, when that is another rank than me; -1 otherwise (the
// failure is this rank's own).
func OtherRanksFailure(err error, me int) int {
	var re *bootstrap.RankError
	if errors.As(err, &re) && re.Rank != me {
		return re.Rank
	}
	return -1
}

// RankMessage is err as rank me reports it: "rank N: " in front, once
// (errors of the window layer already start with it).
func RankMessage(err error, me int) string {
	msg := err.Error()
	if p := fmt.Sprintf("rank %d: ", me); !strings.HasPrefix(msg, p) {
		msg = p + msg
	}
	return msg
}

// endedAsker is a bootstrap that can say which ranks have ended.
type endedAsker interface{ EndedRanks() map[int]string }

// EndedPeers names the other ranks that have ended, and why (left early
// with os.exit(0), script ended, connection gone), as the hub knows them
// now: what a wait that ran out of time can no longer get from them. ""
// when none has, or where the bootstrap cannot say (in-process ranks).
func (c *Comm) EndedPeers() string {
	a, ok := c.Boot.(endedAsker)
	if !ok {
		return ""
	}
	return bootstrap.DescribeEnded(a.EndedRanks())
}
