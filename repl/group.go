package repl

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// reply is what one rank answered to one chunk.
type reply struct {
	rank   int
	output string   // what it printed
	values []string // the chunk's values, formatted
	err    string   // the error it raised
	stream string   // what is wrong with its stream after an interrupt
	// interrupted: Ctrl-C stopped the chunk on this rank
	interrupted bool
}

// line is one line of a group's text; isErr marks error lines (shown in
// red on a terminal).
type line struct {
	text  string
	isErr bool
}

// group is a set of ranks that answered the same text.
type group struct {
	ranks []int
	lines []line
}

// lines renders a reply. With normalize, the rank's own "rank R: " is
// dropped from error messages, so that the same error on several ranks
// reads the same.
func (r reply) lines(normalize bool) []line {
	var out []line
	add := func(text string, isErr bool) {
		for _, l := range strings.Split(text, "\n") {
			out = append(out, line{text: l, isErr: isErr})
		}
	}
	if r.output != "" {
		add(strings.TrimSuffix(r.output, "\n"), false)
	}
	if len(r.values) > 0 {
		add(strings.Join(r.values, "\t"), false)
	}
	fix := func(s string) string {
		if normalize {
			return dropOwnRank(s, r.rank)
		}
		return s
	}
	if r.err != "" {
		add("error: "+fix(strings.TrimSuffix(r.err, "\n")), true)
	}
	if r.stream != "" {
		add(fix(r.stream), true)
	}
	return out
}

// dropOwnRank removes the first "rank R: " that starts the message or
// follows a ": " (as in "stdin:1: rank 2: w:put: ...").
func dropOwnRank(s string, rank int) string {
	own := "rank " + strconv.Itoa(rank) + ": "
	for from := 0; ; {
		i := strings.Index(s[from:], own)
		if i < 0 {
			return s
		}
		i += from
		if i == 0 || strings.HasSuffix(s[:i], ": ") {
			return s[:i] + s[i+len(own):]
		}
		from = i + len(own)
	}
}

// key is the text by which replies are grouped.
func key(ls []line) string {
	var b strings.Builder
	for _, l := range ls {
		if l.isErr {
			b.WriteByte('!')
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// groupReplies merges ranks whose replies read the same. Groups come in
// the order of their lowest rank; ranks with nothing to show are left out.
// A group of one rank shows its reply as it is; a larger group shows the
// normalized text (see reply.lines).
func groupReplies(rs []reply) []group {
	sorted := append([]reply(nil), rs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].rank < sorted[j].rank })
	index := map[string]int{}
	var groups []group
	var members [][]reply
	for _, r := range sorted {
		ls := r.lines(true)
		if len(ls) == 0 {
			continue
		}
		k := key(ls)
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, group{lines: ls})
			members = append(members, nil)
		}
		groups[i].ranks = append(groups[i].ranks, r.rank)
		members[i] = append(members[i], r)
	}
	for i := range groups {
		if len(members[i]) == 1 {
			groups[i].lines = members[i][0].lines(false)
		}
	}
	return groups
}

// formatRanks writes a sorted rank list compactly: "0-3", "0,2", "0-2,5".
func formatRanks(ranks []int) string {
	rs := append([]int(nil), ranks...)
	sort.Ints(rs)
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(rs[i]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(rs[i]), strconv.Itoa(rs[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// parseRanks reads a rank list ("0,2", "1-3", "0, 2-3") of a job of n
// ranks; the result is sorted and without duplicates.
func parseRanks(s string, n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	add := func(r int) error {
		if r < 0 || r >= n {
			return fmt.Errorf("no rank %d (the ranks are %s)", r, formatRanks(allRanks(n)))
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
		return nil
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("%q is not a rank or a range like 1-3", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a rank or a range like 1-3", part)
			}
		}
		for r := a; r <= b; r++ {
			if err := add(r); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ranks given (e.g. :on 0,2 or :on 1-3)")
	}
	sort.Ints(out)
	return out, nil
}

func allRanks(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
