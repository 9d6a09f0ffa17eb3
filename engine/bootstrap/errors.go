package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxRanks bounds the size of a job.
const MaxRanks = 1 << 20

// ErrBootstrapClosed is returned by calls on a closed Bootstrap.
var ErrBootstrapClosed = errors.New("bootstrap closed")

// RankError reports that another rank failed or died; the bootstrap sets it
// on the job's abort flag and returns it (wrapped) from every call.
type RankError struct {
	Rank   int
	Died   bool   // the rank vanished rather than reporting a failure
	Reason string // the failure, or how the death was noticed
}

// Error reads "rank 3 died (bootstrap connection lost)" or
// "rank 2 failed: script.lua:5: boom".
func (e *RankError) Error() string {
	if e.Died {
		if e.Reason == "" {
			return fmt.Sprintf("rank %d died", e.Rank)
		}
		return fmt.Sprintf("rank %d died (%s)", e.Rank, e.Reason)
	}
	if e.Reason == "" {
		return fmt.Sprintf("rank %d failed", e.Rank)
	}
	if strings.HasPrefix(e.Reason, EndedCleanly) {
		return fmt.Sprintf("rank %d %s", e.Rank, e.Reason)
	}
	return fmt.Sprintf("rank %d failed: %s", e.Rank, e.Reason)
}

// TimeoutError reports a bootstrap call that got no answer in time.
type TimeoutError struct {
	Op      string        // e.g. "allgather #4"
	After   time.Duration // the time the call waited
	Missing []int         // ranks the hub still waited for, when known
	Note    string        // why they are missing, when the hub knows
}

// Error reads "bootstrap allgather #4: no answer within 10s (waiting for rank 3)".
func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("bootstrap %s: no answer within %v", e.Op, e.After.Round(time.Millisecond))
	if len(e.Missing) > 0 {
		msg += " (waiting for " + DescribeRanks(e.Missing) + ")"
	}
	if e.Note != "" {
		msg += ": " + e.Note
	}
	return msg
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// Timeout reports true, as net errors do.
func (e *TimeoutError) Timeout() bool { return true }

// DescribeRanks writes "rank 3" or "ranks 1, 2, 5", shortening long lists.
func DescribeRanks(ranks []int) string {
	var b strings.Builder
	if len(ranks) == 1 {
		b.WriteString("rank ")
	} else {
		b.WriteString("ranks ")
	}
	for i, r := range ranks {
		if i == maxListedRanks {
			fmt.Fprintf(&b, " and %d more", len(ranks)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, r)
	}
	return b.String()
}
