package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/transport"
)

// Variables the launcher sets for the ranks of logical nodes (--nodes).
const (
	// EnvLogicalNode gives a rank's node its own host identity.
	EnvLogicalNode = transport.LogicalNodeEnv
	// EnvShmDir puts a node's shared-memory segments in its own directory.
	EnvShmDir = transport.ShmDirEnv
	// EnvReportDir is where a rank of a logical node writes the reports
	// that must outlive the job (the Go stacks of Ctrl-\, an internal
	// error's stack): the launcher's temporary directory, since the node's
	// own (its TMPDIR) goes at the job's end.
	EnvReportDir = "LUACOLL_REPORT_DIR"
	// EnvDeviceIndex is the index a rank of a logical node picks its GPU
	// by (in --gpus, or modulo the device count): its rank, since the
	// logical nodes share this machine's devices. Elsewhere the local
	// rank is.
	EnvDeviceIndex = "LUACOLL_DEVICE_INDEX"
)

// DeviceIndex is the index rank env picks its GPU by: EnvDeviceIndex
// when the launcher set it (logical nodes), else the local rank.
func DeviceIndex(env RankEnv, getenv func(string) string) int {
	if v, err := strconv.Atoi(getenv(EnvDeviceIndex)); err == nil && v >= 0 {
		return v
	}
	return env.LocalRank
}

// NodeOf places rank r of n ranks split into k logical nodes, in blocks
// (the first n%k nodes hold one rank more): its node, its rank within the
// node and the node's size.
func NodeOf(r, n, k int) (node, local, localSize int) {
	if k <= 1 {
		return 0, r, n
	}
	per, extra := n/k, n%k
	first := func(node int) int { return node*per + min(node, extra) }
	for node = 0; node < k-1 && first(node+1) <= r; node++ {
	}
	localSize = per
	if node < extra {
		localSize++
	}
	return node, r - first(node), localSize
}

// CheckNodes validates a --nodes value for n ranks.
func CheckNodes(nodes, n int) error {
	if nodes < 1 || nodes > n {
		return fmt.Errorf("--nodes %d: want 1..%d (one rank per node at least)", nodes, n)
	}
	return nil
}

// logicalNodes is what a job split into nodes on one machine owns: per
// node a shared-memory directory, a temporary directory and a share of the
// CPUs.
type logicalNodes struct {
	k        int
	shm, tmp []string
	cpus     [][]int // nil when the CPUs are too few to split
	setUCX   bool    // UCX_TLS was unset: the nodes talk over TCP
	setNCCL  bool    // NCCL_HOSTID was unset: NCCL is told of the nodes too
}

// nodeDirName is the name of the directories of node of job, made by the
// launcher pid: luacoll-node-PID-JOB-nodeK, a TempDir name (kind node), so
// that `luacoll clean` keeps them while the launcher runs and removes
// them once it is gone (killed with SIGKILL, say).
func nodeDirName(pid int, job string, node int) string {
	return fmt.Sprintf("luacoll-node-%d-%s-node%d", pid, job, node)
}

// newLogicalNodes makes the directories of k nodes of job (k > 1), in
// shmRoot (/dev/shm) and the temporary directory. Node directories that
// earlier launchers left when they were killed go first.
func newLogicalNodes(job string, k int, shmRoot string, baseEnv []string) (*logicalNodes, error) {
	removeStaleNodes(shmRoot, os.TempDir())
	l := &logicalNodes{k: k, setUCX: true, setNCCL: true}
	for _, kv := range baseEnv {
		if strings.HasPrefix(kv, "UCX_TLS=") {
			l.setUCX = false
		}
		if strings.HasPrefix(kv, "NCCL_HOSTID=") {
			l.setNCCL = false
		}
	}
	for node := range k {
		name := nodeDirName(os.Getpid(), job, node)
		shm, tmp := filepath.Join(shmRoot, name), filepath.Join(os.TempDir(), name)
		for _, d := range []string{shm, tmp} {
			if err := os.Mkdir(d, 0o700); err != nil {
				_ = l.remove()
				return nil, fmt.Errorf("logical node %d: %w", node, err)
			}
		}
		l.shm, l.tmp = append(l.shm, shm), append(l.tmp, tmp)
	}
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		var cpus []int
		for c := range 1 << 12 {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
		if len(cpus) >= k {
			for node := range k {
				l.cpus = append(l.cpus, cpus[node*len(cpus)/k:(node+1)*len(cpus)/k])
			}
		}
	}
	return l, nil
}

// env is what a rank of node adds to its environment.
func (l *logicalNodes) env(node int) []string {
	out := []string{
		EnvLogicalNode + "=" + strconv.Itoa(node),
		EnvShmDir + "=" + l.shm[node],
		"TMPDIR=" + l.tmp[node],
		EnvReportDir + "=" + os.TempDir(),
	}
	if l.setUCX {
		// The nodes share nothing but the network: not UCX's shared
		// memory transports either.
		out = append(out, "UCX_TLS=tcp")
	}
	if l.setNCCL {
		// NCCL (bench --vs nccl) tells hosts apart by this id: each
		// node is a host of its own to it too.
		out = append(out, "NCCL_HOSTID=luacoll-node"+strconv.Itoa(node))
	}
	return out
}

// start runs start (which forks a rank) on a thread limited to node's
// CPUs, so the rank starts with them as the CPUs it may use.
func (l *logicalNodes) start(node int, start func() error) error {
	if l == nil || l.cpus == nil {
		return start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if unix.SchedGetaffinity(0, &old) != nil {
		return start()
	}
	for _, c := range l.cpus[node] {
		set.Set(c)
	}
	if unix.SchedSetaffinity(0, &set) != nil {
		return start()
	}
	err := start()
	_ = unix.SchedSetaffinity(0, &old)
	return err
}

// remove deletes the nodes' directories and whatever the ranks left there.
func (l *logicalNodes) remove() error {
	if l == nil {
		return nil
	}
	var errs []error
	for _, d := range append(append([]string(nil), l.shm...), l.tmp...) {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeStaleNodes removes the node directories in dirs that no running
// launcher owns (best effort: what cannot be removed stays for `luacoll
// clean` to report).
func removeStaleNodes(dirs ...string) {
	found, _ := findNodeDirs(dirs...)
	for _, l := range found {
		if l.InUse == "" {
			_ = RemoveLeftover(l)
		}
	}
}
