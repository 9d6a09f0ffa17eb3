package main

import (
	"os"
	"strings"
	"testing"
)

// TestSummarize: results as go test prints them (the failed test's output,
// each package's line) and one closing line of the skips grouped by why.
func TestSummarize(t *testing.T) {
	f, err := os.Open("testdata/stream.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	failed, err := summarize(f, &b)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	want := "=== RUN   TestBroken\n    a_test.go:9: got 1, want 2\n--- FAIL: TestBroken (0.00s)\nFAIL\nFAIL\texample.com/a\t0.01s\n" +
		"ok  \texample.com/b\t0.02s\n" +
		"skipped 3 tests: no UCX here (2), tmux is not installed (1) (README, Tests: what the full suite needs)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	failed, err = summarize(strings.NewReader(`{"Action":"pass","Package":"p","Test":"T"}`+"\n"), &b)
	if failed || err != nil || b.String() != "" {
		t.Errorf("no skips: failed %v, err %v, %q", failed, err, b.String())
	}
}
