package cpuset

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Max is one more than the highest CPU number this package handles (the
// size of the kernel's affinity mask it passes).
const Max = 1024

// Parse parses a CPU list in the kernel's format ("0-3,8,10-11"; blanks
// around items allowed, an empty string is the empty list). The result is
// sorted and has no duplicates.
func Parse(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	seen := make(map[int]bool)
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpu list %q: range %q runs backwards", s, item)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

func cpuNumber(s string) (int, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	if v >= Max {
		return 0, fmt.Errorf("CPU %d is past the highest supported (%d)", v, Max-1)
	}
	return v, nil
}

// Format writes cpus (in any order, duplicates allowed) in the kernel's
// list format, with runs folded into ranges.
func Format(cpus []int) string {
	s := append([]int(nil), cpus...)
	sort.Ints(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] <= s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if s[j] == s[i] {
			fmt.Fprintf(&b, "%d", s[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", s[i], s[j])
		}
		i = j + 1
	}
	return b.String()
}

// Intersect returns the CPUs in both sorted lists.
func Intersect(a, b []int) []int {
	var out []int
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// Member is one rank's part of a plan: the host it runs on and the CPUs it
// may be given (sorted).
type Member struct {
	Host string
	CPUs []int
}

// Split gives each rank its CPUs. Ranks on one host with the same candidate
// set share that set out in rank order: whole cores at a time (coreOf names
// a CPU's core; nil: every CPU is its own), as many cores to each as
// possible, when that gives every rank at least min CPUs, so that no two
// ranks share a core's hardware threads; else single CPUs at a time when
// that gives every rank at least min; else that group's ranks get nil (no
// share: leave them as they are). Ranks whose candidate sets differ are
// planned apart (their sets may overlap).
func Split(members []Member, min int, coreOf func(cpu int) int) [][]int {
	if min < 1 {
		min = 1
	}
	if coreOf == nil {
		coreOf = func(cpu int) int { return cpu }
	}
	out := make([][]int, len(members))
	for _, ranks := range groupOf(members) {
		cpus := members[ranks[0]].CPUs
		shares := shareOut(byCore(cpus, coreOf), len(ranks), min)
		if shares == nil {
			// Too few cores for whole-core shares: share out the threads.
			single := make([][]int, len(cpus))
			for i, c := range cpus {
				single[i] = []int{c}
			}
			shares = shareOut(single, len(ranks), min)
		}
		if shares != nil {
			for i, r := range ranks {
				out[r] = shares[i]
			}
		}
	}
	return out
}

// Deal gives one CPU to each rank of a group (ranks on one host with the
// same candidate set, as in Split) that has more ranks than CPUs: the
// group's CPUs in turn, one hardware thread of every core before a
// second of any, so that ranks pile up evenly. Ranks of other groups get
// nil.
func Deal(members []Member, coreOf func(cpu int) int) [][]int {
	if coreOf == nil {
		coreOf = func(cpu int) int { return cpu }
	}
	out := make([][]int, len(members))
	for _, ranks := range groupOf(members) {
		cpus := members[ranks[0]].CPUs
		if len(ranks) <= len(cpus) || len(cpus) == 0 {
			continue
		}
		var turn []int
		units := byCore(cpus, coreOf)
		for t := 0; len(turn) < len(cpus); t++ {
			for _, u := range units {
				if t < len(u) {
					turn = append(turn, u[t])
				}
			}
		}
		for i, r := range ranks {
			out[r] = []int{turn[i%len(turn)]}
		}
	}
	return out
}

// groupOf lists the ranks of each group (one host, the same candidate
// CPUs), in the order of each group's first rank.
func groupOf(members []Member) [][]int {
	return groupInOrder(len(members), func(r int) string { return members[r].Host + "\x00" + Format(members[r].CPUs) })
}

// byCore groups sorted cpus by core, in the order of each core's first CPU.
func byCore(cpus []int, coreOf func(int) int) [][]int {
	units := groupInOrder(len(cpus), func(i int) int { return coreOf(cpus[i]) })
	for _, u := range units {
		for j, i := range u {
			u[j] = cpus[i]
		}
	}
	return units
}

// groupInOrder groups the indices 0..n-1 by key, the groups in the order
// of their first index.
func groupInOrder[K comparable](n int, key func(int) K) [][]int {
	index := make(map[K]int)
	var out [][]int
	for i := 0; i < n; i++ {
		k := key(i)
		g, ok := index[k]
		if !ok {
			g = len(out)
			index[k] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
	}
	return out
}

// shareOut deals units to k ranks in contiguous runs, the first ones one
// more when they do not divide evenly; nil when there are fewer units than
// ranks or a share would hold fewer than min CPUs.
func shareOut(units [][]int, k, min int) [][]int {
	if len(units) < k {
		return nil
	}
	out := make([][]int, k)
	start := 0
	for i := range out {
		size := len(units) / k
		if i < len(units)%k {
			size++
		}
		for _, u := range units[start : start+size] {
			out[i] = append(out[i], u...)
		}
		sort.Ints(out[i])
		if len(out[i]) < min {
			return nil
		}
		start += size
	}
	return out
}

// CoreOf reads the machine's CPU topology from sysfs and returns a
// function naming each CPU's core (the first CPU of its core's hardware
// threads); a CPU sysfs does not describe is its own core.
func CoreOf() func(cpu int) int {
	cores := map[int]int{}
	return func(cpu int) int {
		if k, ok := cores[cpu]; ok {
			return k
		}
		k := cpu
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu))
		if err == nil {
			if sib, err := Parse(string(b)); err == nil && len(sib) > 0 {
				k = sib[0]
			}
		}
		cores[cpu] = k
		return k
	}
}

// Current returns the CPUs the calling thread may run on.
func Current() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var out []int
	for c := 0; c < Max; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Apply restricts every thread of this process to cpus. Threads started
// later inherit the mask from the thread that starts them, so the process
// stays on cpus.
func Apply(cpus []int) error {
	if len(cpus) == 0 {
		return errors.New("set affinity: empty CPU list")
	}
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= Max {
			return fmt.Errorf("set affinity: CPU %d out of range", c)
		}
		set.Set(c)
	}
	done := make(map[int]bool)
	// A thread may start while the list is being walked: walk until a
	// pass finds none new.
	for pass := 0; ; pass++ {
		if pass == 100 {
			return errors.New("set affinity: threads kept starting while they were being bound")
		}
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("set affinity: %w", err)
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh++
			if err := unix.SchedSetaffinity(tid, &set); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // the thread has exited
				}
				return fmt.Errorf("set affinity of thread %d to CPUs %s: %w", tid, Format(cpus), err)
			}
			done[tid] = true
		}
		if fresh == 0 {
			return nil
		}
	}
}
