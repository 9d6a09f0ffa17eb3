package launch

import (
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/bootstrap"
)

// ompiEnv is rank r of an Open MPI 4.1 job of n ranks on one host, as
// mpirun sets it (the variables that matter here).
func ompiEnv(r, n int, jobid string) map[string]string {
	return map[string]string{
		"OMPI_COMM_WORLD_RANK": strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE": strconv.Itoa(n),
		"OMPI_COMM_WORLD_LOCAL_RANK": strconv.Itoa(r), "OMPI_COMM_WORLD_LOCAL_SIZE": strconv.Itoa(n),
		"OMPI_MCA_ess_base_jobid": jobid, "PMIX_NAMESPACE": jobid, "PMIX_RANK": strconv.Itoa(r),
		"OMPI_MCA_orte_hnp_uri":   "2091712512.0;tcp://192.0.2.2:55103",
		"OMPI_MCA_orte_num_nodes": "1", "TMPDIR": "/scratch",
	}
}

// slurmEnv is task r of a Slurm step of n tasks on one node.
func slurmEnv(r, n int, job, step string) map[string]string {
	return map[string]string{
		"SLURM_PROCID": strconv.Itoa(r), "SLURM_NTASKS": strconv.Itoa(n), "SLURM_LOCALID": strconv.Itoa(r),
		"SLURM_NODEID": "0", "SLURM_JOB_ID": job, "SLURM_STEP_ID": step, "SLURM_STEP_NUM_NODES": "1",
	}
}

// with returns m with the changes applied ("" deletes).
func with(m map[string]string, kv ...string) map[string]string {
	out := maps.Clone(m)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func addrOf(t *testing.T, env map[string]string) string {
	t.Helper()
	got, ok, err := RankEnvFromEnv(envFunc(env))
	if err != nil || !ok {
		t.Fatalf("RankEnvFromEnv(%v) = ok %v, err %v", env, ok, err)
	}
	return got.Addr
}

func TestMeetingPointOneHost(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	ompi := addrOf(t, ompiEnv(0, 4, "2091712513"))
	if want := bootstrap.UnixPrefix + "/scratch/luacoll-" + uid + "/openmpi-"; !strings.HasPrefix(ompi, want) ||
		!strings.HasSuffix(ompi, ".sock") {
		t.Fatalf("open mpi meeting point %q, want %s<id>.sock", ompi, want)
	}
	slurm := addrOf(t, slurmEnv(0, 4, "123", "0"))
	if want := bootstrap.UnixPrefix + "/tmp/luacoll-" + uid + "/slurm-"; !strings.HasPrefix(slurm, want) {
		t.Fatalf("slurm meeting point %q, want %s<id>.sock", slurm, want)
	}

	// Every rank of a job computes the same point.
	for r := 1; r < 4; r++ {
		if a := addrOf(t, ompiEnv(r, 4, "2091712513")); a != ompi {
			t.Errorf("open mpi rank %d: %q, rank 0 %q", r, a, ompi)
		}
		if a := addrOf(t, slurmEnv(r, 4, "123", "0")); a != slurm {
			t.Errorf("slurm rank %d: %q, rank 0 %q", r, a, slurm)
		}
	}

	// Another job, another step, another mpirun: another point.
	others := map[string]map[string]string{
		"open mpi job id": ompiEnv(0, 4, "2091712769"),
		"open mpi hnp":    with(ompiEnv(0, 4, "2091712513"), "OMPI_MCA_orte_hnp_uri", "2091712512.0;tcp://192.0.2.2:41000"),
		"open mpi 5":      with(ompiEnv(0, 4, ""), "PMIX_NAMESPACE", "prterun-vm-4179@1"),
		"slurm step":      slurmEnv(0, 4, "123", "1"),
		"slurm job":       slurmEnv(0, 4, "124", "0"),
		"other TMPDIR":    with(ompiEnv(0, 4, "2091712513"), "TMPDIR", "/other"),
	}
	seen := map[string]string{ompi: "open mpi", slurm: "slurm"}
	for name, env := range others {
		a := addrOf(t, env)
		if prev, ok := seen[a]; ok {
			t.Errorf("%s meets at %q like %s", name, a, prev)
		}
		seen[a] = name
	}
}

func TestMeetingPointSingleHostEvidence(t *testing.T) {
	ok := map[string]map[string]string{
		"open mpi local size":  with(ompiEnv(1, 4, "7"), "OMPI_MCA_orte_num_nodes", ""),
		"slurm job one node":   with(slurmEnv(1, 4, "9", "0"), "SLURM_STEP_NUM_NODES", "", "SLURM_JOB_NUM_NODES", "1"),
		"slurm tasks per node": with(slurmEnv(1, 4, "9", "0"), "SLURM_STEP_NUM_NODES", "", "SLURM_JOB_NUM_NODES", "2", "SLURM_NTASKS_PER_NODE", "4"),
		"slurm old names":      with(slurmEnv(1, 4, "", ""), "SLURM_JOBID", "9", "SLURM_STEPID", "0"),
		"long TMPDIR":          with(ompiEnv(0, 2, "7"), "TMPDIR", "/"+strings.Repeat("d", 200)),
		"relative TMPDIR":      with(ompiEnv(0, 2, "7"), "TMPDIR", "tmp"),
	}
	for name, env := range ok {
		a := addrOf(t, env)
		path, isUnix := strings.CutPrefix(a, bootstrap.UnixPrefix)
		if !isUnix || len(path) > maxSocketPath || !strings.HasPrefix(path, "/") {
			t.Errorf("%s: meeting point %q", name, a)
		}
	}
	if a := addrOf(t, with(ompiEnv(0, 2, "7"), "TMPDIR", "/"+strings.Repeat("d", 200))); !strings.HasPrefix(a, bootstrap.UnixPrefix+"/tmp/") {
		t.Errorf("long TMPDIR: %q, want a path in /tmp", a)
	}
	// An address given wins over the meeting point.
	if a := addrOf(t, with(ompiEnv(0, 2, "7"), EnvAddr, "node0:4000")); a != "node0:4000" {
		t.Errorf("with %s: %q", EnvAddr, a)
	}
	if a := addrOf(t, with(slurmEnv(0, 2, "7", "0"), "MASTER_ADDR", "n0", "MASTER_PORT", "5")); a != "n0:5" {
		t.Errorf("with MASTER_ADDR: %q", a)
	}
}

func TestMeetingPointErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"open mpi two nodes", with(ompiEnv(1, 4, "7"), "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "OMPI_MCA_orte_num_nodes", "2"),
			[]string{"not all on one host (OMPI_MCA_orte_num_nodes=2)", "set LUACOLL_ADDR=host:port", "mpirun -x LUACOLL_ADDR=HOST:PORT"}},
		{"open mpi local size below size", with(ompiEnv(1, 4, "7"), "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "OMPI_MCA_orte_num_nodes", ""),
			[]string{"OMPI_COMM_WORLD_LOCAL_SIZE=2, OMPI_COMM_WORLD_SIZE=4", "-x MASTER_ADDR=HOST -x MASTER_PORT=PORT"}},
		{"open mpi without local size", with(ompiEnv(0, 4, "7"), "OMPI_COMM_WORLD_LOCAL_SIZE", "", "OMPI_COMM_WORLD_LOCAL_RANK", "",
			"OMPI_MCA_orte_num_nodes", ""), []string{"OMPI_COMM_WORLD_LOCAL_SIZE is not set", "mpirun -x LUACOLL_ADDR"}},
		{"open mpi without job id", with(ompiEnv(0, 4, ""), "PMIX_NAMESPACE", ""),
			[]string{"none of PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, OMPI_MCA_orte_ess_jobid is set", "set LUACOLL_ADDR=host:port"}},
		{"slurm two nodes", with(slurmEnv(0, 4, "9", "0"), "SLURM_STEP_NUM_NODES", "2"),
			[]string{"(SLURM_STEP_NUM_NODES=2)", "srun --export=ALL,LUACOLL_ADDR=HOST:PORT", "scontrol show hostnames"}},
		{"slurm job two nodes", with(slurmEnv(0, 4, "9", "0"), "SLURM_STEP_NUM_NODES", "", "SLURM_JOB_NUM_NODES", "2"),
			[]string{"(SLURM_JOB_NUM_NODES=2)", "srun --export=ALL,LUACOLL_ADDR"}},
		{"slurm tasks per node below size", with(slurmEnv(0, 4, "9", "0"), "SLURM_STEP_NUM_NODES", "", "SLURM_NTASKS_PER_NODE", "2"),
			[]string{"SLURM_NTASKS_PER_NODE=2, SLURM_NTASKS=4"}},
		{"slurm nothing about nodes", with(slurmEnv(0, 4, "9", "0"), "SLURM_STEP_NUM_NODES", ""),
			[]string{"none of SLURM_STEP_NUM_NODES, SLURM_JOB_NUM_NODES, SLURM_NTASKS_PER_NODE is set"}},
		{"slurm without job id", slurmEnv(0, 4, "", "0"), []string{"none of SLURM_JOB_ID, SLURM_JOBID is set"}},
		{"torchrun keeps its message", map[string]string{"RANK": "0", "WORLD_SIZE": "2"},
			[]string{"no rendezvous address: set LUACOLL_ADDR=host:port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := RankEnvFromEnv(envFunc(tt.env))
			if err == nil || !ok {
				t.Fatalf("got %+v, ok %v, err %v; want an error", got, ok, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
