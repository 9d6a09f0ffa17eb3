package launch

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/luacoll/luacoll/engine/bootstrap"
)

// Launcher names reported in RankEnv.Source.
const (
	SourceLuacoll  = "luacoll"
	SourceTorchrun = "torchrun"
	SourceSlurm    = "slurm"
	SourceOpenMPI  = "openmpi"
)

// Variables that the luacoll launcher sets for every rank.
const (
	EnvRank      = "LUACOLL_RANK"
	EnvSize      = "LUACOLL_SIZE"
	EnvLocalRank = "LUACOLL_LOCAL_RANK"
	EnvLocalSize = "LUACOLL_LOCAL_SIZE"
	EnvNode      = "LUACOLL_NODE"
	EnvAddr      = "LUACOLL_ADDR"
	EnvJob       = "LUACOLL_JOB"
	EnvListenFD  = "LUACOLL_LISTEN_FD"
	EnvPrefixed  = "LUACOLL_PREFIXED"
	// EnvProgressFD names rank 0's descriptor for progress lines (see
	// LaunchConfig.Progress).
	EnvProgressFD = "LUACOLL_PROGRESS_FD"
	// EnvJoinFD names the descriptor every rank of luacoll's launcher
	// inherits: the read end of a pipe whose write end the launcher closes
	// when a rank fails, so that the ranks still joining the job (which
	// could otherwise wait their whole timeout for a rank that will never
	// come) stop at once.
	EnvJoinFD = "LUACOLL_JOIN_FD"
)

// defaultMasterPort is torchrun's default rendezvous port.
const defaultMasterPort = "29500"

// maxRanks bounds the job size accepted from the environment.
const maxRanks = bootstrap.MaxRanks

// maxJobID bounds the length of a job id (it ends up in file names).
const maxJobID = 64

// RankEnv describes this process's place in a job.
type RankEnv struct {
	Rank, Size, LocalRank, LocalSize, Node int
	// Addr is the rendezvous host:port, or bootstrap.UnixPrefix and a
	// socket path for a one-host job of mpirun or srun; rank 0 listens
	// there.
	Addr string
	// JobID may be empty under external launchers (the hub then makes one).
	JobID string
	// Source names the launcher: "luacoll", "torchrun", "slurm", "openmpi".
	Source string
	// ListenFD, when positive, is the inherited listening socket of rank 0
	// (the luacoll launcher passes it).
	ListenFD int
	// JoinFD, when positive, is the inherited pipe that ends (EOF) when the
	// launcher gives up on the job (EnvJoinFD).
	JoinFD int
	// ReportDir is where reports that must outlive the job go (EnvReportDir;
	// "": the temporary directory). ReportsDir says which.
	ReportDir string
	// Prefixed reports that the launcher prefixes every output line with
	// "[rank] ".
	Prefixed bool
	// MPSDaemon reports that luacoll's launcher started a private MPS
	// control daemon for the job, whose client this rank is (EnvMPS).
	MPSDaemon bool
}

// sourceVars names the variables one launcher uses.
type sourceVars struct {
	source                           string
	rank, size, localRank, localSize string
	node                             string
}

// RankEnvFromEnv reads the environment through getenv (os.Getenv when nil).
// It recognises, first match wins, the luacoll launcher (LUACOLL_*),
// torchrun (RANK, WORLD_SIZE, ...), Slurm (SLURM_PROCID, ...) and Open MPI
// (OMPI_COMM_WORLD_*). ok is false when no launcher's variables are present:
// the caller then runs a single rank or launches. When a launcher is
// recognised but its variables are invalid, ok is true and err names the
// variable, e.g. `RANK="x": not an integer`.
//
// LUACOLL_ADDR always sets the rendezvous address; otherwise it is
// MASTER_ADDR:MASTER_PORT (MASTER_PORT defaults to 29500 under torchrun
// only). A single-rank job without an address rendezvouses on
// 127.0.0.1:0. Under Open MPI or Slurm with every rank on one host, a job
// without an address meets at a Unix socket named after the launcher's job
// identity (see meetingPoint); across hosts the error names what each rank
// needs and how that launcher passes it. Missing local values default to a
// single node.
func RankEnvFromEnv(getenv func(string) string) (env RankEnv, ok bool, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	get := func(name string) string {
		if name == "" {
			return ""
		}
		return strings.TrimSpace(getenv(name))
	}
	var vars sourceVars
	switch {
	case get(EnvRank) != "" || get(EnvSize) != "":
		vars = sourceVars{SourceLuacoll, EnvRank, EnvSize, EnvLocalRank, EnvLocalSize, EnvNode}
	case get("RANK") != "" || get("WORLD_SIZE") != "":
		vars = sourceVars{SourceTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
	case get("SLURM_PROCID") != "":
		// Slurm's local size comes from SLURM_NTASKS_PER_NODE or
		// SLURM_TASKS_PER_NODE (see localSize).
		vars = sourceVars{SourceSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "", "SLURM_NODEID"}
	case get("OMPI_COMM_WORLD_RANK") != "" || get("OMPI_COMM_WORLD_SIZE") != "":
		vars = sourceVars{SourceOpenMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
			"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", ""}
	default:
		return RankEnv{}, false, nil
	}
	env, err = parseRankEnv(vars, get)
	if err != nil {
		return RankEnv{}, true, fmt.Errorf("%s environment: %w", vars.source, err)
	}
	return env, true, nil
}

// parseRankEnv reads and validates the variables of one launcher.
func parseRankEnv(v sourceVars, get func(string) string) (RankEnv, error) {
	env := RankEnv{Source: v.source}
	rank, rankSet, err := envInt(get, v.rank)
	if err != nil {
		return env, err
	}
	size, sizeSet, err := envInt(get, v.size)
	if err != nil {
		return env, err
	}
	if !rankSet {
		return env, fmt.Errorf("%s is not set (%s is)", v.rank, v.size)
	}
	if !sizeSet {
		return env, fmt.Errorf("%s is not set (%s is)", v.size, v.rank)
	}
	if size < 1 {
		return env, fmt.Errorf("%s=%q: must be at least 1", v.size, get(v.size))
	}
	if size > maxRanks {
		return env, fmt.Errorf("%s=%q: more than %d ranks", v.size, get(v.size), maxRanks)
	}
	if rank < 0 {
		return env, fmt.Errorf("%s=%q: negative", v.rank, get(v.rank))
	}
	if rank >= size {
		return env, fmt.Errorf("%s=%q: must be below %s=%d", v.rank, get(v.rank), v.size, size)
	}
	env.Rank, env.Size = rank, size

	if err := readLocal(&env, v, get); err != nil {
		return env, err
	}
	if err := readLaunchExtras(&env, get); err != nil {
		return env, err
	}
	addr, err := rendezvousAddr(env, get)
	if err != nil {
		return env, err
	}
	env.Addr = addr
	return env, nil
}

// readLocal fills LocalRank, LocalSize and Node, defaulting to one node.
func readLocal(env *RankEnv, v sourceVars, get func(string) string) error {
	lrank, lrankSet, err := envInt(get, v.localRank)
	if err != nil {
		return err
	}
	node, nodeSet, err := envInt(get, v.node)
	if err != nil {
		return err
	}
	lsize, lsizeName, lsizeSet, err := localSize(v, get, node)
	if err != nil {
		return err
	}
	switch {
	case !lrankSet && !lsizeSet:
		lrank, lsize = env.Rank, env.Size
	case !lrankSet:
		return fmt.Errorf("%s is not set (%s is)", v.localRank, lsizeName)
	case !lsizeSet:
		lsize = env.Size
		lsizeName = v.size
	}
	if lrank < 0 {
		return fmt.Errorf("%s=%q: negative", v.localRank, get(v.localRank))
	}
	if lsize < 1 {
		return fmt.Errorf("%s=%d: must be at least 1", lsizeName, lsize)
	}
	if lsize > env.Size {
		return fmt.Errorf("%s=%d: more than %s=%d", lsizeName, lsize, v.size, env.Size)
	}
	if lrank >= lsize {
		return fmt.Errorf("%s=%q: must be below %s=%d", v.localRank, get(v.localRank), lsizeName, lsize)
	}
	if !nodeSet {
		node = 0
	}
	if node < 0 {
		return fmt.Errorf("%s=%q: negative", v.node, get(v.node))
	}
	if node >= env.Size {
		return fmt.Errorf("%s=%q: must be below %s=%d", v.node, get(v.node), v.size, env.Size)
	}
	if v.source == SourceOpenMPI && lsize < env.Size {
		// Open MPI names no node index; with the default by-slot mapping
		// the ranks of a node are contiguous.
		node = (env.Rank - lrank) / lsize
		if node < 0 || node >= env.Size {
			node = 0
		}
	}
	env.LocalRank, env.LocalSize, env.Node = lrank, lsize, node
	return nil
}

// localSize returns the number of ranks on this node and the variable it
// came from.
func localSize(v sourceVars, get func(string) string, node int) (n int, name string, set bool, err error) {
	if v.source != SourceSlurm {
		n, set, err = envInt(get, v.localSize)
		return n, v.localSize, set, err
	}
	const perNode, tasksPerNode = "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"
	if n, set, err = envInt(get, perNode); err != nil || set {
		return n, perNode, set, err
	}
	s := get(tasksPerNode)
	if s == "" {
		return 0, tasksPerNode, false, nil
	}
	if node < 0 {
		node = 0
	}
	n, err = slurmTasksOnNode(s, node)
	if err != nil {
		return 0, tasksPerNode, false, fmt.Errorf("%s=%q: %w", tasksPerNode, s, err)
	}
	return n, tasksPerNode, true, nil
}

// slurmTasksOnNode picks node's entry from a Slurm task-count list such as
// "4(x2),3" (two nodes with 4 tasks, then one with 3).
func slurmTasksOnNode(list string, node int) (int, error) {
	idx := node
	for _, entry := range strings.Split(list, ",") {
		count, repeat := entry, "1"
		if i := strings.IndexByte(entry, '('); i >= 0 {
			if !strings.HasSuffix(entry, ")") || !strings.HasPrefix(entry[i:], "(x") {
				return 0, fmt.Errorf("malformed entry %q", entry)
			}
			count, repeat = entry[:i], entry[i+2:len(entry)-1]
		}
		c, err := strconv.Atoi(count)
		if err != nil || c < 0 {
			return 0, fmt.Errorf("malformed entry %q", entry)
		}
		r, err := strconv.Atoi(repeat)
		if err != nil || r < 1 {
			return 0, fmt.Errorf("malformed entry %q", entry)
		}
		if idx < r {
			return c, nil
		}
		idx -= r
	}
	return 0, fmt.Errorf("no entry for node %d", node)
}

// readLaunchExtras reads the job id, the inherited listener and join pipe,
// the reports' directory, the output prefix flag and the MPS mark (set by
// the luacoll launcher, honoured under any launcher).
func readLaunchExtras(env *RankEnv, get func(string) string) error {
	if job := get(EnvJob); job != "" {
		if err := checkJobID(job); err != nil {
			return fmt.Errorf("%s=%q: %w", EnvJob, job, err)
		}
		env.JobID = job
	}
	fd, err := inheritedFD(get, EnvListenFD)
	if err != nil {
		return err
	}
	if fd != 0 && env.Rank != 0 {
		return fmt.Errorf("%s=%q: only rank 0 inherits the listener, this is rank %d",
			EnvListenFD, get(EnvListenFD), env.Rank)
	}
	env.ListenFD = fd
	if env.JoinFD, err = inheritedFD(get, EnvJoinFD); err != nil {
		return err
	}
	env.ReportDir = get(EnvReportDir)
	switch p := get(EnvPrefixed); strings.ToLower(p) {
	case "", "0", "false":
	case "1", "true":
		env.Prefixed = true
	default:
		return fmt.Errorf("%s=%q: want 1 or 0", EnvPrefixed, p)
	}
	switch m := get(EnvMPS); m {
	case "":
	case MPSDaemonJob:
		env.MPSDaemon = true
	default:
		return fmt.Errorf("%s=%q: want %s or nothing", EnvMPS, m, MPSDaemonJob)
	}
	return nil
}

// checkJobID accepts ids made of letters, digits, '.', '_' and '-'.
func checkJobID(job string) error {
	if len(job) > maxJobID {
		return fmt.Errorf("longer than %d characters", maxJobID)
	}
	for _, r := range job {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("character %q not allowed (letters, digits, '.', '_', '-')", r)
		}
	}
	return nil
}

// rendezvousAddr picks the hub address: LUACOLL_ADDR, else
// MASTER_ADDR:MASTER_PORT.
func rendezvousAddr(env RankEnv, get func(string) string) (string, error) {
	if a := get(EnvAddr); a != "" {
		if err := checkAddr(a, env.Size); err != nil {
			return "", fmt.Errorf("%s=%q: %w", EnvAddr, a, err)
		}
		return a, nil
	}
	host := get("MASTER_ADDR")
	if host == "" {
		if env.Size == 1 {
			return "127.0.0.1:0", nil
		}
		if env.Source == SourceOpenMPI || env.Source == SourceSlurm {
			return meetingPoint(env, get)
		}
		return "", fmt.Errorf("no rendezvous address: set %s=host:port (or MASTER_ADDR and MASTER_PORT) "+
			"to where rank 0 can listen", EnvAddr)
	}
	port := get("MASTER_PORT")
	if port == "" {
		if env.Source != SourceTorchrun {
			return "", fmt.Errorf("MASTER_PORT is not set (MASTER_ADDR is); set it or %s=host:port", EnvAddr)
		}
		port = defaultMasterPort
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("MASTER_PORT=%q: not a port number", port)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(p))
	if err := checkAddr(addr, env.Size); err != nil {
		return "", fmt.Errorf("MASTER_ADDR=%q: %w", host, err)
	}
	return addr, nil
}

// checkAddr validates a host:port rendezvous address.
func checkAddr(addr string, size int) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not host:port: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a port number", port)
	}
	if p == 0 && size > 1 {
		return fmt.Errorf("port 0 works only for a single rank")
	}
	return nil
}

// envInt reads an integer variable; set is false when it is absent or empty.
func envInt(get func(string) string, name string) (v int, set bool, err error) {
	if name == "" {
		return 0, false, nil
	}
	s := get(name)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.Atoi(s)
	if err != nil {
		return 0, true, fmt.Errorf("%s=%q: not an integer", name, s)
	}
	return v, true, nil
}

// inheritedFD is the descriptor the variable name gives (0 where it is
// unset or 0); one of standard input, output or error is refused.
func inheritedFD(get func(string) string, name string) (int, error) {
	fd, set, err := envInt(get, name)
	if err != nil || !set || fd == 0 {
		return 0, err
	}
	if fd < 3 {
		return 0, fmt.Errorf("%s=%q: must be 3 or more", name, get(name))
	}
	return fd, nil
}

// ReportsDir is where this rank writes reports that must outlive the job:
// ReportDir, else the temporary directory.
func (e RankEnv) ReportsDir() string {
	if e.ReportDir != "" {
		return e.ReportDir
	}
	return os.TempDir()
}
