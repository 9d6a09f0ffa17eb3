package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func testFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f rankFlags
	f.register(fs, 1)
	fs.String("b", "", "")
	fs.Bool("x", false, "")
	return fs
}

// The attached form of a one-letter flag that takes a value ("-n2") is
// split as getopt would; everything else is left for the flag package.
func TestExpandAttached(t *testing.T) {
	fs := testFlagSet()
	for _, c := range []struct{ in, want string }{
		{"-n2 s.lua", "-n 2 s.lua"},
		{"--n4 -b1K", "--n 4 -b 1K"},
		{"-n=2 -n 3 -timeout 1s -n5", "-n=2 -n 3 -timeout 1s -n 5"},
		{"-timeout -n2", "-timeout -n2"}, // a value, however it looks
		{"-x5", "-x5"},                   // a boolean takes no value
		{"-device cuda s.lua -n2", "-device cuda s.lua -n2"},
		{"-- -n2", "-- -n2"},
		{"-no-prefix -n8", "-no-prefix -n 8"},
		{"-q2", "-q2"},
		{"-nope 2", "-nope 2"}, // not -n ope: the flag package names -nope
		{"--no-such-flag", "--no-such-flag"},
		{"", ""},
	} {
		got := expandAttached(fs, strings.Fields(c.in))
		if !slices.Equal(got, strings.Fields(c.want)) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzExpandAttached: splitting only ever cuts a word in two.
func FuzzExpandAttached(f *testing.F) {
	for _, s := range []string{"-n2 s.lua", "-timeout -n2", "--n=3", "-b1K -e2", "- -n", "-n"} {
		f.Add(s)
	}
	fs := testFlagSet()
	f.Fuzz(func(t *testing.T, s string) {
		in := strings.Split(s, " ")
		out := expandAttached(fs, in)
		if strings.Join(out, "") != strings.Join(in, "") || len(out) < len(in) {
			t.Fatalf("%q became %q", in, out)
		}
	})
}

// Arguments after the script that look like luacoll's flags are named.
func TestFlagLookalikes(t *testing.T) {
	fs := testFlagSet()
	got := flagLookalikes(fs, strings.Fields("-n 4 --timeout=1s x -v --n2 -- -device"))
	want := []string{"-n", "--timeout=1s", "--n2", "-device"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
