package engine

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/luacoll/luacoll/engine/launch"
)

// MismatchError is a collective called differently on different ranks.
type MismatchError struct {
	// Seq counts the collectives since Open returned (the script's: 1 is
	// its first); 0 is a collective of the start-up.
	Seq   int
	Calls []string // per rank
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	if e.Seq > 0 {
		fmt.Fprintf(&b, "collective call #%d differs across ranks:", e.Seq)
	} else {
		b.WriteString("a start-up collective differs across ranks:")
	}
	order, groups := groupByText(e.Calls)
	for _, c := range order {
		fmt.Fprintf(&b, " %s called %s;", rankList(groups[c]), c)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// rankList words ranks in order as "rank 3", "ranks 0,2" or "ranks 0-3,5"
// (runs of three or more as ranges).
func rankList(rs []int) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		switch {
		case j-i >= 2:
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		case j == i+1:
			parts = append(parts, fmt.Sprint(rs[i]), fmt.Sprint(rs[j]))
		default:
			parts = append(parts, fmt.Sprint(rs[i]))
		}
		i = j + 1
	}
	if len(rs) == 1 {
		return "rank " + parts[0]
	}
	return "ranks " + strings.Join(parts, ",")
}

// groupByText groups the ranks' texts: each distinct text once, in the
// order of the first rank that has it, with its ranks ("" texts skipped).
func groupByText(texts []string) (order []string, ranks map[string][]int) {
	ranks = map[string][]int{}
	for r, t := range texts {
		if t == "" {
			continue
		}
		if _, ok := ranks[t]; !ok {
			order = append(order, t)
		}
		ranks[t] = append(ranks[t], r)
	}
	return order, ranks
}

// StatusError is a collective status call (CollectiveStatus, the backend
// check of Open) that failed on some ranks: Msgs holds each rank's
// message, "" where it succeeded. Every rank gets the same error.
type StatusError struct {
	Call string
	Msgs []string
}

func (e *StatusError) Error() string {
	order, ranks := groupByText(e.Msgs)
	if len(order) == 1 {
		return fmt.Sprintf("%s failed on %s: %s", e.Call, rankList(ranks[order[0]]), order[0])
	}
	parts := make([]string, len(order))
	for i, m := range order {
		parts[i] = fmt.Sprintf("%s: %s", rankList(ranks[m]), m)
	}
	return fmt.Sprintf("%s failed: %s", e.Call, strings.Join(parts, "; "))
}

// Reporter is the rank that prints the error for the whole job: the lowest
// rank that failed.
func (e *StatusError) Reporter() int {
	for r, m := range e.Msgs {
		if m != "" {
			return r
		}
	}
	return 0
}

// ReportOpenError prints an error of Open on w, after prefix ("luacoll: "),
// and returns the rank's exit status. A StatusError is the same on every
// rank: its Reporter prints it and exits 1; the others exit
// launch.ExitPeerFailed and say nothing under luacoll's launcher (which
// shows every rank's output together), one line under another (whose
// ranks may write separate logs). Any other error is printed by the rank
// that has it.
func ReportOpenError(w io.Writer, prefix string, env launch.RankEnv, err error) int {
	var se *StatusError
	if errors.As(err, &se) && se.Reporter() != env.Rank {
		if env.Source != launch.SourceLuacoll {
			fmt.Fprintf(w, "%srank %d: the job did not start; rank %d says why\n", prefix, env.Rank, se.Reporter())
		}
		return launch.ExitPeerFailed
	}
	fmt.Fprintf(w, "%s%v\n", prefix, err)
	return 1
}

// RefusedError is a collective that one or more ranks refused before
// taking part (a bad argument, a freed object): every rank returns it, so
// that all of them raise and stay in step.
type RefusedError struct {
	Seq     int
	Call    string         // this rank's call
	Reasons map[int]string // the refusing ranks' errors, by rank
}

func (e *RefusedError) Error() string {
	ranks := make([]int, 0, len(e.Reasons))
	for r := range e.Reasons {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = fmt.Sprintf("rank %d refused it: %s", r, e.Reasons[r])
	}
	return fmt.Sprintf("collective call #%d (%s) failed on every rank: %s", e.Seq, e.Call, strings.Join(parts, "; "))
}
