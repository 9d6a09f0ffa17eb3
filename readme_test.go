package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeScript is the README's my_schedule.lua: a plan (for check), a
// window, the script's arguments.
const readmeScript = `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local p = lc.plan(function() w:barrier() end)
p:run{ times = 2 }
p:free()
if lc.rank == 0 then print("my_schedule", arg[1], arg[2]) end
`

// readmeLine is one command line of the README's code blocks.
type readmeLine struct {
	line int
	cmd  string
}

// readmeCommands returns the command lines of text's indented code
// blocks that start with bin/luacoll or mpirun, continuation lines
// joined and "# ..." comments removed.
func readmeCommands(text string) []readmeLine {
	var out []readmeLine
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "    ") {
			continue
		}
		start := i + 1
		cmd := stripComment(strings.TrimSpace(l))
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSpace(strings.TrimSuffix(cmd, "\\")) + " " + stripComment(strings.TrimSpace(lines[i]))
		}
		if strings.HasPrefix(cmd, "bin/luacoll ") || strings.HasPrefix(cmd, "mpirun ") {
			out = append(out, readmeLine{start, cmd})
		}
	}
	return out
}

// stripComment cuts a shell comment (a # after a blank, outside quotes).
func stripComment(s string) string {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}

// expandReadme turns a README line into the command lines it stands for:
// "put|pingpong|barrier" is each of them, "[command]" none and "run".
func expandReadme(cmd string) []string {
	f := strings.Fields(cmd)
	for i, w := range f {
		if w == "[command]" {
			return []string{strings.Join(f[:i], " "), strings.Join(append(append([]string{}, f[:i]...), "run"), " ")}
		}
		if strings.Contains(w, "|") && !strings.ContainsAny(w, "'\"") {
			var out []string
			for _, alt := range strings.Split(w, "|") {
				g := append(append([]string{}, f[:i]...), alt)
				out = append(out, strings.Join(append(g, f[i+1:]...), " "))
			}
			return out
		}
	}
	return []string{cmd}
}

// TestReadmeCommandLines runs every command line of the README that needs
// no GPU and no second host, as written, in a folder with bin/luacoll and
// the my_schedule.lua and setup.lua it names; each must succeed. mpirun
// lines get the flags the README says they need as root and on fewer
// cores than ranks. Lines that take long (the benchmarks' default sweeps)
// are left out under -short.
func TestReadmeCommandLines(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(string(text))
	if len(cmds) < 15 {
		t.Fatalf("found %d command lines in README.md", len(cmds))
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "luacoll")); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"my_schedule.lua": readmeScript, "setup.lua": "print('setup', ...)\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ran := 0
	for _, rl := range cmds {
		for _, cmd := range expandReadme(rl.cmd) {
			t.Run(fmt.Sprintf("line%d", rl.line), func(t *testing.T) {
				switch {
				case strings.Contains(cmd, "--device cuda"):
					t.Skip("needs a GPU")
				case strings.Contains(cmd, " -H "):
					t.Skip("needs several hosts")
				case strings.Contains(cmd, "--nodes"):
					needUCX(t)
				case testing.Short() && strings.Contains(cmd, " bench ") && !strings.Contains(cmd, "pingpong") && !strings.Contains(cmd, "barrier"):
					t.Skip("a benchmark's default sweep: long for -short")
				}
				if strings.HasPrefix(cmd, "mpirun ") {
					cmd = mpirunAsHere(t, cmd)
				}
				ran++
				runReadmeLine(t, dir, cmd)
			})
		}
	}
	if ran == 0 && !testing.Short() {
		t.Error("no README line ran")
	}
}

// mpirunAsHere adds what mpirun needs on this machine to cmd: as root,
// --allow-run-as-root; with fewer cores than ranks, --oversubscribe (the
// README says both beside its mpirun lines). It skips without mpirun.
func mpirunAsHere(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found (Debian: apt-get install openmpi-bin)")
	}
	var extra []string
	if os.Getuid() == 0 {
		extra = append(extra, "--allow-run-as-root")
	}
	f := strings.Fields(cmd)
	for i, w := range f {
		if w == "-np" && i+1 < len(f) {
			if np, err := strconv.Atoi(f[i+1]); err == nil && np > runtime.NumCPU() {
				extra = append(extra, "--oversubscribe")
			}
		}
	}
	return strings.Join(append([]string{"mpirun"}, extra...), " ") + strings.TrimPrefix(cmd, "mpirun")
}

// runReadmeLine runs cmd with bash in dir, standard input empty; it must
// exit 0.
func runReadmeLine(t *testing.T, dir, cmd string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir = dir
	session := t.TempDir()
	c.Env = append(cleanEnv(), "HOME="+dir, "OMPI_MCA_orte_tmpdir_base="+session, "PRTE_MCA_prte_tmpdir_base="+session)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	if err := c.Run(); err != nil {
		t.Errorf("%s: %v\nstdout:\n%.2000s\nstderr:\n%.2000s", cmd, err, o.String(), e.String())
	}
}
