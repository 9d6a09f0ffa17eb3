package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/transport/launchenv"
	tnet "github.com/luacoll/luacoll/transport/net"
)

// netInfo is what luacoll info says about the network transport.
type netInfo struct {
	tnet.Info
	Error string `json:"error,omitempty"`
}

func describeNet() netInfo {
	info, err := tnet.Describe()
	n := netInfo{Info: info}
	if err != nil {
		n.Error = err.Error()
	}
	return n
}

func (n netInfo) String() string {
	if n.Error != "" {
		return "network peers (UCX): " + n.Error + "\n"
	}
	var tl []string
	for _, r := range n.Resources {
		tl = append(tl, r.Transport+"/"+r.Device)
	}
	cudaMem := "host memory only"
	if n.CUDA {
		cudaMem = "host and CUDA memory"
	}
	return fmt.Sprintf("network peers: UCX %s, transports %s (UCX_TLS, UCX_NET_DEVICES choose), registers %s\n",
		n.Version, strings.Join(tl, ", "), cudaMem)
}

// kernelsInfo is whether this build's kernel program is compiled and
// cached for one compute capability of the GPUs here.
type kernelsInfo struct {
	Arch   string `json:"arch"`
	Cached bool   `json:"cached"`
	Path   string `json:"path,omitempty"` // the cache file ("" with no cache directory)
}

// describeKernels says, for each compute capability among devs, whether
// the kernels are in the cache (kernels.Load reads them there) or the
// first CUDA run of this build will compile them.
func describeKernels(devs []cuda.DeviceInfo) []kernelsInfo {
	dir, err := kernels.DefaultCacheDir()
	if err != nil {
		dir = ""
	}
	out := []kernelsInfo{}
	seen := map[kernels.Arch]bool{}
	for _, d := range devs {
		a := kernels.Arch{Major: d.CCMajor, Minor: d.CCMinor}
		if seen[a] {
			continue
		}
		seen[a] = true
		k := kernelsInfo{Arch: a.String(), Cached: kernels.CompileNotice(dir, a) == ""}
		if dir != "" {
			k.Path = kernels.CachePath(dir, a)
		}
		out = append(out, k)
	}
	return out
}

func (k kernelsInfo) String() string {
	switch {
	case k.Cached:
		return fmt.Sprintf("kernels for %s: compiled for this build, in %s\n", k.Arch, k.Path)
	case k.Path == "":
		return fmt.Sprintf("kernels for %s: compiled at every CUDA run (no cache directory; it can take a minute)\n", k.Arch)
	}
	return fmt.Sprintf("kernels for %s: not compiled yet for this build (the first CUDA run compiles them, which can take a minute, into %s)\n", k.Arch, k.Path)
}

func cmdInfo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("info", "luacoll info [--json] [--tuning]\n\nPrints the host, the CUDA driver, every GPU (memory, compute capability, SMs,\n"+
		"copy engines, VMM, POSIX-FD handles, 64-bit stream memory operations, NVLink\n"+
		"multicast: \"supported, not used\" or \"not supported\", MPS: whether this process's\n"+
		"contexts would go through an MPS server), the\n"+
		"peer-access matrices (the driver's and NVML's P2P write status), the NVLink topology,\n"+
		"whether NVRTC and NCCL were found, and whether this build's kernels are compiled and\n"+
		"cached for the GPUs' compute capabilities (else the first CUDA run compiles them);\n"+
		"the UCX version and the transports and devices\n"+
		"it sees for network peers.\n"+
		"Without a GPU it says so and exits 0. --json prints the same facts as one JSON object\n"+
		"whose keys are all lower case, words joined by _ (driver_version, pci_bus_id).\n"+
		"--tuning lists the knobs (docs/tuning.md) instead: each with the value in effect and\n"+
		"whether it came from the environment or is the default; a value a knob cannot take\n"+
		"is listed as refused and named on stderr, and the exit status is then 2.", stderr)
	asJSON := fs.Bool("json", false, "print the facts as JSON (snake_case keys)")
	tuning := fs.Bool("tuning", false, "list the knobs with the values in effect and where they came from")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if *tuning {
		code := printTuning(knobs.Current(), *asJSON, stdout, stderr)
		if stray := strayVariables(os.Environ()); len(stray) > 0 {
			fmt.Fprintf(stderr, "luacoll info: set but neither knobs nor the launcher's (ignored): %s\n", strings.Join(stray, ", "))
		}
		return code
	}
	info := cuda.Probe()
	kern := describeKernels(info.Devices)
	network := describeNet()
	host, _ := os.Hostname()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Host    string        `json:"host"`
			CPUs    int           `json:"cpus"`
			Version string        `json:"luacoll"`
			CUDA    cuda.Info     `json:"cuda"`
			Kernels []kernelsInfo `json:"kernels"`
			Network netInfo       `json:"network"`
		}{host, runtime.NumCPU(), versionString(), info, kern, network}); err != nil {
			fmt.Fprintf(stderr, "luacoll info: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "luacoll %s\nhost: %s, %d CPUs, %s/%s\n", versionString(), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "host backend: available (shared memory from memfd_create, passed between ranks over Unix sockets)\n")
	fmt.Fprint(stdout, network.String())
	fmt.Fprint(stdout, info.String())
	for _, k := range kern {
		fmt.Fprint(stdout, k.String())
	}
	return 0
}

// knobJSON is one knob as `luacoll info --tuning --json` prints it.
type knobJSON struct {
	Name    string `json:"name"`
	Class   string `json:"class"`
	Value   string `json:"value"`
	Source  string `json:"source"`
	Unit    string `json:"unit,omitempty"`
	Default string `json:"default"`
}

// printTuning prints the knobs in effect in set; 2 when the environment
// gave one a value it cannot take.
func printTuning(set *knobs.Set, asJSON bool, stdout, stderr io.Writer) int {
	if asJSON {
		var out []knobJSON
		for _, e := range set.Effective() {
			out = append(out, knobJSON{e.Knob.Name, string(e.Knob.Class), e.Value, e.Source, e.Knob.Unit, e.Knob.Default})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "luacoll info: %v\n", err)
			return 1
		}
	} else {
		fmt.Fprint(stdout, set.Text())
	}
	if err := set.Err(); err != nil {
		fmt.Fprintf(stderr, "luacoll info: %v\n", err)
		return 2
	}
	return 0
}

// strayVariables returns the LUACOLL_ variables of environ that are
// neither knobs nor the launcher's: a misspelt knob, or a switch retired
// after its measurement (docs/results/knobs-retired.md).
func strayVariables(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, knob := knobs.Lookup(name); strings.HasPrefix(name, "LUACOLL_") && !knob && !launchenv.Known(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
