package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/luacoll/luacoll/cuda"
)

func cmdInfo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("info", "luacoll info [--json]\n\nPrints the host, the CUDA driver, every GPU (memory, compute capability, SMs,\n"+
		"copy engines, VMM, POSIX-FD handles, 64-bit stream memory operations, NVLink\n"+
		"multicast: \"supported, not used\" or \"not supported\", MPS: whether this process's\n"+
		"contexts would go through an MPS server), the\n"+
		"peer-access matrices (the driver's and NVML's P2P write status), the NVLink topology,\n"+
		"and whether NVRTC and NCCL were found.\n"+
		"Without a GPU it says so and exits 0.", stderr)
	asJSON := fs.Bool("json", false, "print the facts as JSON")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	info := cuda.Probe()
	host, _ := os.Hostname()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Host    string    `json:"host"`
			CPUs    int       `json:"cpus"`
			Version string    `json:"luacoll"`
			CUDA    cuda.Info `json:"cuda"`
		}{host, runtime.NumCPU(), versionString(), info}); err != nil {
			fmt.Fprintf(stderr, "luacoll info: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "luacoll %s\nhost: %s, %d CPUs, %s/%s\n", versionString(), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "host backend: available (shared memory from memfd_create, passed between ranks over Unix sockets)\n")
	fmt.Fprint(stdout, info.String())
	return 0
}
