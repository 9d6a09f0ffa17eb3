package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/luacoll/luacoll/engine/bootstrap"
)

// Under mpirun or srun with every rank on one host, the job needs no
// rendezvous address: rank 0 listens on a Unix socket whose path comes from
// the launcher's job identity, in a directory only this user may use, and
// the others dial it. Two jobs at once have different identities, so they
// never meet; nothing is a fixed port.

// maxSocketPath bounds a Unix socket path (sun_path holds 108 bytes with
// its terminating NUL).
const maxSocketPath = 107

// jobIdentityVars are, by launcher, the variables whose values name the
// job (and step) for every rank alike. The first group needs at least one
// of its variables set; the second adds what is there.
var jobIdentityVars = map[string][2][]string{
	// Open MPI 4.1 sets OMPI_MCA_ess_base_jobid and PMIX_NAMESPACE
	// (older releases OMPI_MCA_orte_ess_jobid, Open MPI 5 only
	// PMIX_NAMESPACE). The job id's family is a 16-bit hash of mpirun's
	// host and pid: the URI of mpirun's own listener, unique while it
	// runs, tells two live jobs apart should the hashes meet.
	SourceOpenMPI: {
		{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"},
		{"OMPI_MCA_orte_hnp_uri"},
	},
	SourceSlurm: {
		{"SLURM_JOB_ID", "SLURM_JOBID"},
		{"SLURM_STEP_ID", "SLURM_STEPID"},
	},
}

// meetingPoint returns the Unix socket address a one-host job of an
// external launcher meets at, or an error naming what the rank needs
// instead.
func meetingPoint(env RankEnv, get func(string) string) (string, error) {
	one, why := oneHost(env, get)
	if !one {
		return "", severalHostsError(env.Source, why)
	}
	id, err := jobIdentity(env.Source, get)
	if err != nil {
		return "", err
	}
	return bootstrap.UnixPrefix + socketPath(get("TMPDIR"), os.Getuid(), env.Source, id), nil
}

// oneHost reports whether the launcher says that every rank runs on this
// host; why is the evidence either way, for messages.
func oneHost(env RankEnv, get func(string) string) (one bool, why string) {
	switch env.Source {
	case SourceOpenMPI:
		const local, nodes = "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_num_nodes"
		if n, set, err := envInt(get, nodes); err == nil && set {
			return n == 1, fmt.Sprintf("%s=%d", nodes, n)
		}
		n, set, err := envInt(get, local)
		if err != nil || !set {
			return false, fmt.Sprintf("%s is not set, so the ranks may be on several hosts", local)
		}
		return n == env.Size, fmt.Sprintf("%s=%d, OMPI_COMM_WORLD_SIZE=%d", local, n, env.Size)
	case SourceSlurm:
		const step, job, perNode = "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS_PER_NODE"
		if n, set, err := envInt(get, step); err == nil && set {
			return n == 1, fmt.Sprintf("%s=%d", step, n)
		}
		jobNodes, jobSet, err := envInt(get, job)
		if err == nil && jobSet && jobNodes == 1 {
			return true, job + "=1"
		}
		if n, set, err := envInt(get, perNode); err == nil && set {
			return n == env.Size, fmt.Sprintf("%s=%d, SLURM_NTASKS=%d", perNode, n, env.Size)
		}
		if err == nil && jobSet {
			return false, fmt.Sprintf("%s=%d", job, jobNodes)
		}
		return false, fmt.Sprintf("none of %s, %s, %s is set, so the ranks may be on several hosts", step, job, perNode)
	}
	return false, ""
}

// jobIdentity returns a digest of the launcher's job identity variables.
func jobIdentity(source string, get func(string) string) (string, error) {
	groups, ok := jobIdentityVars[source]
	if !ok {
		return "", fmt.Errorf("%s names no job identity", source)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", source)
	found := false
	for i, group := range groups {
		for _, name := range group {
			if v := get(name); v != "" {
				fmt.Fprintf(h, "%s=%s\n", name, v)
				found = found || i == 0
			}
		}
	}
	if !found {
		return "", fmt.Errorf("no rendezvous address, and none of %s is set to tell this job from others "+
			"on this host: set %s=host:port (or MASTER_ADDR and MASTER_PORT) to where rank 0 can listen",
			strings.Join(groups[0], ", "), EnvAddr)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// socketPath is the meeting socket of a job: <tmp>/luacoll-<uid>/<source>-<id>.sock,
// in /tmp when tmp is not an absolute path or makes the path too long.
func socketPath(tmp string, uid int, source, id string) string {
	name := filepath.Join("luacoll-"+strconv.Itoa(uid), source+"-"+id+".sock")
	if filepath.IsAbs(tmp) {
		if p := filepath.Join(tmp, name); len(p) <= maxSocketPath {
			return p
		}
	}
	return filepath.Join("/tmp", name)
}

// severalHostsError says what a rank needs when its job spans hosts, and
// how that launcher passes it.
func severalHostsError(source, why string) error {
	how := ""
	switch source {
	case SourceOpenMPI:
		how = fmt.Sprintf("; pass it to every rank with mpirun -x %s=HOST:PORT "+
			"(or -x MASTER_ADDR=HOST -x MASTER_PORT=PORT)", EnvAddr)
	case SourceSlurm:
		how = fmt.Sprintf("; srun passes the caller's environment, or name it: srun --export=ALL,%s=HOST:PORT "+
			"(HOST e.g. $(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1))", EnvAddr)
	}
	if why != "" {
		why = " (" + why + ")"
	}
	return fmt.Errorf("no rendezvous address, and the ranks are not all on one host%s: "+
		"set %s=host:port (or MASTER_ADDR and MASTER_PORT) to where rank 0 can listen, the same for every rank%s",
		why, EnvAddr, how)
}
