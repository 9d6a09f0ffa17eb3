package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/luacoll/luacoll/luabind"
)

// version and revision are set with -ldflags by the Makefile.
var (
	version  = "0.1.0-dev"
	revision = ""
)

// buildRevision is the revision set by the Makefile, else the one the Go
// toolchain recorded (vcs.revision, shortened; "+dirty" when the tree had
// changes), else "unknown".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if rev != "" {
			return rev[:min(len(rev), 7)] + dirty
		}
	}
	return "unknown"
}

func versionString() string {
	return fmt.Sprintf("%s (revision %s, %s, %s/%s, %s)", version, buildRevision(), runtime.Version(),
		runtime.GOOS, runtime.GOARCH, luabind.LuaVersion())
}

// cmdVersion prints the version line.
func cmdVersion(stdout io.Writer) int {
	fmt.Fprintf(stdout, "luacoll %s\n", versionString())
	return 0
}
