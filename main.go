package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/scripts"
	"github.com/luacoll/luacoll/transport/knobs"
)

const usageText = `luacoll: one-sided communication scripted in Lua, on N ranks, host or GPU.

Usage:
  luacoll run [-n N] [flags] [script.lua [args...]]     run a script on N ranks (default: the tour)
  luacoll repl [-n N] [flags]                           interactive Lua on N ranks
  luacoll check [-n N] script.lua                       verify every plan a script makes, run none
  luacoll bench KIND [flags]                            measure the window stack and the collectives:
                                                        put, pingpong, barrier, allgather, reduce_scatter, allreduce
  luacoll calibrate [-n 2] [--nodes 2] [-o FILE]        measure the cost model plans are estimated with
  luacoll info [--tuning]                               GPUs, links, capabilities, libraries; the knobs in effect
  luacoll clean [--dry-run]                             remove what killed jobs left (never a running job's)
  luacoll docs [--knobs] [-o FILE]                      write the Lua API reference, or the knobs' table (Markdown)
  luacoll version                                       version and build
  luacoll help [command]                                this text, or a command's flags

Scripts are files, or embedded ones by name:
%s
require() finds files next to the script and the embedded lib/ modules (%s).
In Lua, help() lists the API.

--trace FILE (run, repl, bench) writes a timeline of every rank: a slice per window
operation from enqueue to completion, syncs, collectives and errors, clocks aligned
with rank 0's, and an arrow from each signal's post to the wait_signal_from it let
through; open it in ui.perfetto.dev or chrome://tracing.

Under torchrun, Slurm or Open MPI (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS,
OMPI_COMM_WORLD_RANK/SIZE), 'luacoll run script.lua' runs as that one rank and
meets the others at MASTER_ADDR:MASTER_PORT or LUACOLL_ADDR.
`

// usage is the text of 'luacoll help', with the embedded scripts' names.
func usage() string {
	var b strings.Builder
	line := " "
	for _, n := range scripts.Names() {
		if len(line)+len(n)+1 > 96 {
			b.WriteString(line + "\n")
			line = " "
		}
		line += " " + n
	}
	b.WriteString(line)
	return fmt.Sprintf(usageText, b.String(), strings.Join(scripts.Modules(), ", "))
}

func main() {
	luabind.Version = version
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run", "repl", "check", "bench", "calibrate":
		// A knob's bad value stops the command before any rank starts.
		if err := knobs.Current().Err(); err != nil {
			fmt.Fprintf(stderr, "luacoll %s: %v\n", cmd, err)
			return 2
		}
	}
	switch cmd {
	case "run":
		return cmdRun(rest, stdout, stderr)
	case "repl":
		return cmdRepl(rest, stdout, stderr)
	case "check":
		return cmdCheck(rest, stdout, stderr)
	case "bench":
		return cmdBench(rest, stdout, stderr)
	case "calibrate":
		return cmdCalibrate(rest, stdout, stderr)
	case "info":
		return cmdInfo(rest, stdout, stderr)
	case "docs":
		return cmdDocs(rest, stdout, stderr)
	case "clean":
		return cmdClean(rest, stdout, stderr)
	case "version", "--version", "-version":
		return cmdVersion(stdout)
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 && rest[0] != "help" {
			// "help bench allgather" is "bench allgather --help".
			return realMain(append(append([]string(nil), rest...), "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, usage())
		return 0
	}
	fmt.Fprintf(stderr, "luacoll: unknown command %q\n\n%s", cmd, usage())
	return 2
}
