package launch

import "fmt"

// CPU binding modes (Options.CPUBind).
const (
	// CPUBindNone leaves the process's affinity as it was started.
	CPUBindNone = "none"
	// CPUBindAuto gives each rank its share of the CPUs it may run on
	// (those near its GPU, where the system says which) when the share
	// holds at least two CPUs (one on the host backend), and leaves the
	// ranks as started otherwise.
	CPUBindAuto = "auto"
	// CPUBindSpread is auto down to one CPU per rank.
	CPUBindSpread = "spread"
)

// CheckCPUBind reports whether mode is one of the binding modes ("" is
// none).
func CheckCPUBind(mode string) error {
	switch mode {
	case "", CPUBindNone, CPUBindAuto, CPUBindSpread:
		return nil
	}
	return fmt.Errorf("unknown CPU binding %q (want auto, spread or none)", mode)
}
