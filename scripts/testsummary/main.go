package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize copies the stream's results to w as go test prints them and
// then the skip summary; failed reports whether anything failed.
func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	type key struct{ pkg, test string }
	buf := map[key][]string{}
	var skips []skip
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // not test2json's: as it came
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			if e.Test == "" {
				if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			buf[k] = append(buf[k], e.Output)
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "fail", "build-fail":
			failed = true
			for _, o := range buf[k] {
				fmt.Fprint(w, o)
			}
			delete(buf, k)
		case "skip":
			if e.Test != "" {
				skips = append(skips, skip{pkg: e.Package, test: e.Test, why: skipReason(buf[k])})
			}
			delete(buf, k)
		case "pass":
			delete(buf, k)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	if line := skipLine(skips); line != "" {
		fmt.Fprintln(w, line)
	}
	return failed, nil
}

// skip is one skipped test and why.
type skip struct{ pkg, test, why string }

// skipAt matches the line t.Skip writes: "    file_test.go:12: why".
var skipAt = regexp.MustCompile(`^\s+[\w.-]+_test\.go:\d+: (.*)$`)

// skipReason is the gist of why a test skipped, from its output: the
// message of its last t.Skip line up to a colon or a parenthesis (the
// details differ from machine to machine), or "no reason given".
func skipReason(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		m := skipAt.FindStringSubmatch(strings.TrimRight(out[i], "\n"))
		if m == nil {
			continue
		}
		why := m[1]
		for _, cut := range []string{" (", ": ", "; "} {
			if j := strings.Index(why, cut); j > 0 {
				why = why[:j]
			}
		}
		return strings.TrimSpace(why)
	}
	return "no reason given"
}

// skipLine is the one-line summary of skips ("" for none): the groups by
// reason, largest first, each with its count.
func skipLine(skips []skip) string {
	if len(skips) == 0 {
		return ""
	}
	count := map[string]int{}
	for _, s := range skips {
		count[s.why]++
	}
	whys := make([]string, 0, len(count))
	for w := range count {
		whys = append(whys, w)
	}
	sort.Slice(whys, func(i, j int) bool {
		if count[whys[i]] != count[whys[j]] {
			return count[whys[i]] > count[whys[j]]
		}
		return whys[i] < whys[j]
	})
	parts := make([]string, len(whys))
	for i, w := range whys {
		parts[i] = fmt.Sprintf("%s (%d)", w, count[w])
	}
	noun := "tests"
	if len(skips) == 1 {
		noun = "test"
	}
	return fmt.Sprintf("skipped %d %s: %s (README, Tests: what the full suite needs)", len(skips), noun, strings.Join(parts, ", "))
}
