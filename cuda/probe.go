package cuda

/*
#include "lc_cuda.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DeviceInfo describes one CUDA device for `luacoll info`.
type DeviceInfo struct {
	Index        int    `json:"index"`
	Name         string `json:"name"`
	UUID         string `json:"uuid"`
	PCIBusID     string `json:"pci_bus_id"`
	LocalCPUs    string `json:"local_cpus"` // CPUs nearest the device ("0-15,32-47"; "" when sysfs does not say)
	TotalMem     uint64 `json:"total_mem"`
	CCMajor      int    `json:"cc_major"`
	CCMinor      int    `json:"cc_minor"`
	SMs          int    `json:"sms"`
	CopyEngines  int    `json:"copy_engines"`
	VMM          bool   `json:"vmm"`            // virtual memory management (cuMemCreate/cuMemMap)
	FDHandles    bool   `json:"fd_handles"`     // POSIX file descriptor export of VMM allocations
	StreamMemOps bool   `json:"stream_mem_ops"` // 64-bit cuStreamWriteValue64/cuStreamWaitValue64
	UnifiedAddr  bool   `json:"unified_addr"`   // unified virtual addressing
	// Multicast is MulticastSupported or MulticastNotSupported (a driver
	// that predates the attribute has no multicast).
	Multicast string `json:"multicast"`
	// MPS is whether this process's contexts on the device go through an
	// MPS server: "on", "off", or "unknown" when the driver predates the
	// attribute.
	MPS string `json:"mps"`
	Err string `json:"error"`
}

// How DeviceInfo.Multicast reads.
const (
	MulticastSupported    = "supported, not used"
	MulticastNotSupported = "not supported"
)

// LibInfo says whether an optional library was found, and its version.
type LibInfo struct {
	Found   bool   `json:"found"`
	Version string `json:"version"`
	Path    string `json:"path"`
	Err     string `json:"error"`
}

// Info is what Probe gathers about the machine's CUDA setup.
type Info struct {
	Available     bool         `json:"available"`      // a driver loaded and at least one device exists
	Reason        string       `json:"reason"`         // why not, when !Available
	DriverVersion int          `json:"driver_version"` // cuDriverGetVersion, e.g. 13000
	DriverPath    string       `json:"driver_path"`
	Missing       []string     `json:"missing"` // optional driver entry points not provided
	Devices       []DeviceInfo `json:"devices"`
	// P2P[i][j] is cuDeviceCanAccessPeer(i, j) (false on the diagonal).
	P2P [][]bool `json:"p2p"`
	// Topology is an `nvidia-smi topo -m`-like matrix from NVML: "X" on
	// the diagonal, "NV<n>" for n NVLinks (direct or through NVSwitch),
	// else "PIX", "PXB", "PHB", "NODE" or "SYS". Nil without NVML.
	Topology [][]string `json:"topology"`
	// NVMLP2P is NVML's peer-to-peer status of each pair for writes: "OK"
	// (with "+NVL" when NVML also reports P2P over NVLink), else why not
	// ("chipset", "gpu", "topology", "regkey", "no", "unknown"); "X" on the
	// diagonal. Nil without NVML.
	NVMLP2P [][]string `json:"nvml_p2p,omitempty"`
	NVML    LibInfo    `json:"nvml"`
	NVRTC   LibInfo    `json:"nvrtc"`
	NCCL    LibInfo    `json:"nccl"`
}

// Probe gathers driver, device, peer-access, topology, NVRTC and NCCL facts.
// It never fails: without a driver or device it returns Available=false and
// the reason. It retains no context.
func Probe() Info {
	var info Info
	info.NVRTC = ProbeNVRTC()
	info.NCCL = ProbeNCCL()
	d, err := Load()
	if err != nil {
		info.Reason = err.Error()
		info.NVML = LibInfo{Err: "not queried: no CUDA driver"}
		return info
	}
	info.DriverVersion = d.Version()
	info.DriverPath = d.Path()
	info.Missing = d.Missing()
	n, err := d.DeviceCount()
	if err != nil {
		info.Reason = err.Error()
		return info
	}
	if n == 0 {
		info.Reason = "no CUDA device"
		return info
	}
	info.Available = true
	devs := make([]Device, n)
	for i := range n {
		dev, err := d.DeviceGet(i)
		if err != nil {
			info.Devices = append(info.Devices, DeviceInfo{Index: i, Err: err.Error()})
			continue
		}
		devs[i] = dev
		info.Devices = append(info.Devices, d.DescribeDevice(i, dev))
	}
	info.P2P = make([][]bool, n)
	for i := range n {
		info.P2P[i] = make([]bool, n)
		for j := range n {
			if i != j {
				info.P2P[i][j], _ = d.DeviceCanAccessPeer(devs[i], devs[j])
			}
		}
	}
	bus := make([]string, n)
	for i, di := range info.Devices {
		bus[i] = di.PCIBusID
	}
	info.Topology, info.NVMLP2P, info.NVML = nvmlTopology(bus)
	return info
}

// DescribeDevice gathers the facts `luacoll info` shows about dev (ordinal
// index); what could not be read is named in Err.
func (d *Driver) DescribeDevice(index int, dev Device) DeviceInfo {
	di := DeviceInfo{Index: index}
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	var err error
	di.Name, err = d.DeviceName(dev)
	note(err)
	if d.Has("cuDeviceGetUuid") {
		di.UUID, err = d.DeviceUUID(dev)
		note(err)
	}
	di.PCIBusID, err = d.DevicePCIBusID(dev)
	note(err)
	if err == nil {
		di.LocalCPUs = LocalCPUList(di.PCIBusID)
	}
	di.TotalMem, err = d.DeviceTotalMem(dev)
	note(err)
	attr := func(a DeviceAttribute) int {
		v, err := d.DeviceAttribute(dev, a)
		note(err)
		return v
	}
	di.CCMajor = attr(AttrComputeCapabilityMajor)
	di.CCMinor = attr(AttrComputeCapabilityMinor)
	di.SMs = attr(AttrMultiprocessorCount)
	di.CopyEngines = attr(AttrAsyncEngineCount)
	di.VMM = attr(AttrVirtualMemoryManagement) != 0
	di.FDHandles = attr(AttrHandleTypePosixFDSupported) != 0
	di.StreamMemOps = attr(AttrCanUse64BitStreamMemOps) != 0
	di.UnifiedAddr = attr(AttrUnifiedAddressing) != 0
	// Attributes newer drivers added: an older one refuses to name them,
	// which is an answer, not an error.
	di.Multicast = MulticastNotSupported
	if v, err := d.DeviceAttribute(dev, AttrMulticastSupported); err == nil && v != 0 {
		di.Multicast = MulticastSupported
	}
	di.MPS = "unknown"
	if v, err := d.DeviceAttribute(dev, AttrMPSEnabled); err == nil {
		di.MPS = map[bool]string{true: "on", false: "off"}[v != 0]
	}
	di.Err = strings.Join(errs, "; ")
	return di
}

// ProbeNVRTC loads NVRTC to learn its version, and closes it again.
func ProbeNVRTC() LibInfo {
	n, err := LoadNVRTC()
	if err != nil {
		return LibInfo{Err: err.Error()}
	}
	defer n.Close()
	ma, mi := n.Version()
	return LibInfo{Found: true, Version: fmt.Sprintf("%d.%d", ma, mi), Path: n.Path()}
}

// NCCLLibrary is the library ProbeNCCL opens.
const NCCLLibrary = "libnccl.so.2"

// ProbeNCCL opens NCCLLibrary to learn its version, and closes it again.
func ProbeNCCL() LibInfo {
	cpath := C.CString(NCCLLibrary)
	defer C.free(unsafe.Pointer(cpath))
	lib := C.lc_dlopen(cpath)
	if lib == nil {
		return LibInfo{Err: "dlopen " + NCCLLibrary + ": " + dlerror()}
	}
	defer C.lc_dlclose(lib)
	cname := C.CString("ncclGetVersion")
	defer C.free(unsafe.Pointer(cname))
	f := C.lc_dlsym(lib, cname)
	if f == nil {
		return LibInfo{Path: NCCLLibrary, Err: NCCLLibrary + " lacks ncclGetVersion"}
	}
	var v C.int
	if r := C.lc_ncclGetVersion(f, &v); r != 0 {
		return LibInfo{Path: NCCLLibrary, Err: fmt.Sprintf("ncclGetVersion: error %d", int(r))}
	}
	return LibInfo{Found: true, Version: ncclVersionString(int(v)), Path: NCCLLibrary}
}

// ncclVersionString decodes NCCL_VERSION_CODE: X*10000+Y*100+Z since 2.9,
// X*1000+Y*100+Z before.
func ncclVersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// LocalCPUList returns the CPUs nearest the PCI device busID in the
// kernel's list format, from sysfs local_cpulist ("" when sysfs does not
// say).
func LocalCPUList(busID string) string {
	data, err := os.ReadFile(filepath.Join("/sys/bus/pci/devices", NormPCIBusID(busID), "local_cpulist"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// NormPCIBusID turns "0000:3B:00.0" or "00000000:3B:00.0" into the form
// sysfs names devices by, "0000:3b:00.0".
func NormPCIBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return s
	}
	dom, err := strconv.ParseUint(parts[0], 16, 32)
	if err != nil {
		return s
	}
	return fmt.Sprintf("%04x:%s:%s", dom, parts[1], parts[2])
}

func int8String(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// nvmlTopology builds the link and peer-to-peer matrices for the devices
// with the given PCI bus ids. Every NVML call is made only after a
// successful Init.
func nvmlTopology(bus []string) ([][]string, [][]string, LibInfo) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, nil, LibInfo{Err: "nvml init: " + ret.Error()}
	}
	defer lib.Shutdown()
	li := LibInfo{Found: true, Path: "libnvidia-ml.so.1"}
	if v, ret := lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		li.Version = v
	}
	n := len(bus)
	index := make(map[string]int, n)
	devs := make([]nvml.Device, n)
	for i, b := range bus {
		index[NormPCIBusID(b)] = i
		dev, ret := lib.DeviceGetHandleByPciBusId(b)
		if ret != nvml.SUCCESS {
			li.Err = fmt.Sprintf("nvml device %s: %s", b, ret.Error())
			return nil, nil, li
		}
		devs[i] = dev
	}
	links := make([][]int, n)
	switchLinks := make([]int, n)
	for i, dev := range devs {
		links[i] = make([]int, n)
		for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
			st, ret := dev.GetNvLinkState(l)
			if ret != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
				continue
			}
			pci, ret := dev.GetNvLinkRemotePciInfo(l)
			if ret != nvml.SUCCESS {
				continue
			}
			if j, ok := index[NormPCIBusID(int8String(pci.BusId[:]))]; ok {
				links[i][j]++
				continue
			}
			if t, ret := dev.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS && t == nvml.NVLINK_DEVICE_TYPE_SWITCH {
				switchLinks[i]++
			}
		}
	}
	m := pairMatrix(n, func(i, j int) string {
		nl := links[i][j]
		if switchLinks[i] > 0 && switchLinks[j] > 0 {
			nl += min(switchLinks[i], switchLinks[j])
		}
		if nl > 0 {
			return fmt.Sprintf("NV%d", nl)
		}
		lvl, ret := lib.DeviceGetTopologyCommonAncestor(devs[i], devs[j])
		if ret != nvml.SUCCESS {
			return "?"
		}
		return topoLevelName(lvl)
	})
	p2p := pairMatrix(n, func(i, j int) string {
		st, ret := devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_WRITE)
		if ret != nvml.SUCCESS {
			return "?"
		}
		if st == nvml.P2P_STATUS_OK {
			if nv, ret := devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_NVLINK); ret == nvml.SUCCESS && nv == nvml.P2P_STATUS_OK {
				return "OK+NVL"
			}
		}
		return p2pStatusName(st)
	})
	return m, p2p, li
}

// pairMatrix is an n x n matrix with "X" on the diagonal and cell(i, j)
// elsewhere.
func pairMatrix(n int, cell func(i, j int) string) [][]string {
	m := make([][]string, n)
	for i := range n {
		m[i] = make([]string, n)
		for j := range n {
			if i == j {
				m[i][j] = "X"
			} else {
				m[i][j] = cell(i, j)
			}
		}
	}
	return m
}

// p2pStatusName is a short name of an NVML peer-to-peer status.
func p2pStatusName(st nvml.GpuP2PStatus) string {
	switch st {
	case nvml.P2P_STATUS_OK:
		return "OK"
	case nvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED:
		return "chipset"
	case nvml.P2P_STATUS_GPU_NOT_SUPPORTED:
		return "gpu"
	case nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED:
		return "topology"
	case nvml.P2P_STATUS_DISABLED_BY_REGKEY:
		return "regkey"
	case nvml.P2P_STATUS_NOT_SUPPORTED:
		return "no"
	}
	return "unknown"
}

func topoLevelName(l nvml.GpuTopologyLevel) string {
	switch l {
	case nvml.TOPOLOGY_INTERNAL:
		return "X"
	case nvml.TOPOLOGY_SINGLE:
		return "PIX"
	case nvml.TOPOLOGY_MULTIPLE:
		return "PXB"
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return "PHB"
	case nvml.TOPOLOGY_NODE:
		return "NODE"
	case nvml.TOPOLOGY_SYSTEM:
		return "SYS"
	}
	return "?"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (l LibInfo) String() string {
	if !l.Found {
		return "not found: " + l.Err
	}
	s := l.Version
	if l.Path != "" {
		s += " (" + l.Path + ")"
	}
	return s
}

// String renders the report printed by `luacoll info`.
func (i Info) String() string {
	var b strings.Builder
	if !i.Available {
		fmt.Fprintf(&b, "CUDA: not available: %s\n", i.Reason)
	} else {
		fmt.Fprintf(&b, "CUDA driver: %d.%d (%d), %s\n", i.DriverVersion/1000, i.DriverVersion%1000/10, i.DriverVersion, i.DriverPath)
		if len(i.Missing) > 0 {
			fmt.Fprintf(&b, "  optional entry points missing: %s\n", strings.Join(i.Missing, ", "))
		}
		for _, d := range i.Devices {
			fmt.Fprintf(&b, "GPU%d: %s, %.1f GiB, sm_%d%d, %d SMs, %d copy engines, VMM %s, FD handles %s, 64-bit stream mem ops %s, UVA %s\n",
				d.Index, d.Name, float64(d.TotalMem)/(1<<30), d.CCMajor, d.CCMinor, d.SMs, d.CopyEngines,
				yesNo(d.VMM), yesNo(d.FDHandles), yesNo(d.StreamMemOps), yesNo(d.UnifiedAddr))
			fmt.Fprintf(&b, "      multicast %s, MPS %s\n", d.Multicast, d.MPS)
			fmt.Fprintf(&b, "      PCI %s  %s", d.PCIBusID, d.UUID)
			if d.LocalCPUs != "" {
				fmt.Fprintf(&b, "  CPUs %s", d.LocalCPUs)
			}
			b.WriteString("\n")
			if d.Err != "" {
				fmt.Fprintf(&b, "      errors: %s\n", d.Err)
			}
		}
		p2p := pairMatrix(len(i.Devices), func(a, c int) string {
			if i.P2P[a][c] {
				return "OK"
			}
			return "-"
		})
		b.WriteString("P2P (cuDeviceCanAccessPeer):\n")
		writeMatrix(&b, p2p)
		if i.NVMLP2P != nil {
			b.WriteString("P2P writes (NVML):\n")
			writeMatrix(&b, i.NVMLP2P)
		}
		if i.Topology != nil {
			b.WriteString("Topology (NVML):\n")
			writeMatrix(&b, i.Topology)
		}
	}
	fmt.Fprintf(&b, "NVML: %s\n", i.NVML)
	fmt.Fprintf(&b, "NVRTC: %s\n", i.NVRTC)
	fmt.Fprintf(&b, "NCCL: %s\n", i.NCCL)
	return b.String()
}

func writeMatrix(b *strings.Builder, m [][]string) {
	b.WriteString("        ")
	for j := range m {
		fmt.Fprintf(b, "%-7s", fmt.Sprintf("GPU%d", j))
	}
	b.WriteString("\n")
	for r, row := range m {
		fmt.Fprintf(b, "  %-6s", fmt.Sprintf("GPU%d", r))
		for _, c := range row {
			fmt.Fprintf(b, "%-7s", c)
		}
		b.WriteString("\n")
	}
}
