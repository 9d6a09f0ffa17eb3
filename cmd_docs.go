package main

import (
	"fmt"
	"io"
	"os"

	"github.com/luacoll/luacoll/luabind"
)

func cmdDocs(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("docs", "luacoll docs [-o FILE]\n\nWrites the Lua API reference, generated from the function registry.", stderr)
	out := fs.String("o", "", "write to FILE instead of standard output")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "luacoll docs: unexpected argument %q (use -o FILE)\n", fs.Arg(0))
		return 2
	}
	text := luabind.NewRegistry().Markdown()
	if *out == "" {
		fmt.Fprint(stdout, text)
		return 0
	}
	if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
		fmt.Fprintf(stderr, "luacoll docs: %v\n", err)
		return 1
	}
	return 0
}
