package launch

import (
	"net"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/bootstrap"
)

// envFunc turns a map into a getenv function.
func envFunc(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRankEnvFromEnvSources(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want RankEnv
	}{
		{
			name: "luacoll launcher",
			env: map[string]string{
				EnvRank: "0", EnvSize: "4", EnvLocalRank: "0", EnvLocalSize: "4", EnvNode: "0",
				EnvAddr: "127.0.0.1:4000", EnvJob: "0123456789abcdef", EnvListenFD: "3", EnvPrefixed: "1",
				EnvMPS: "job",
			},
			want: RankEnv{Rank: 0, Size: 4, LocalRank: 0, LocalSize: 4, Node: 0, Addr: "127.0.0.1:4000",
				JobID: "0123456789abcdef", Source: SourceLuacoll, ListenFD: 3, Prefixed: true, MPSDaemon: true},
		},
		{
			name: "luacoll launcher, rank 2 without locals",
			env:  map[string]string{EnvRank: "2", EnvSize: "4", EnvAddr: "host:4000"},
			want: RankEnv{Rank: 2, Size: 4, LocalRank: 2, LocalSize: 4, Addr: "host:4000", Source: SourceLuacoll},
		},
		{
			name: "luacoll wins over torchrun",
			env: map[string]string{EnvRank: "1", EnvSize: "2", EnvAddr: "a:1",
				"RANK": "5", "WORLD_SIZE": "8", "MASTER_ADDR": "b", "MASTER_PORT": "2"},
			want: RankEnv{Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, Addr: "a:1", Source: SourceLuacoll},
		},
		{
			name: "torchrun two nodes",
			env: map[string]string{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
				"GROUP_RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "1234"},
			want: RankEnv{Rank: 5, Size: 8, LocalRank: 1, LocalSize: 4, Node: 1, Addr: "node0:1234", Source: SourceTorchrun},
		},
		{
			name: "torchrun default port",
			env:  map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1"},
			want: RankEnv{Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, Addr: "10.0.0.1:29500", Source: SourceTorchrun},
		},
		{
			name: "torchrun IPv6 master",
			env:  map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "::1", "MASTER_PORT": "7"},
			want: RankEnv{Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, Addr: "[::1]:7", Source: SourceTorchrun},
		},
		{
			name: "torchrun with LUACOLL_ADDR and job",
			env: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "x", EnvAddr: "y:9",
				EnvJob: "job-1"},
			want: RankEnv{Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, Addr: "y:9", JobID: "job-1", Source: SourceTorchrun},
		},
		{
			name: "torchrun single rank without address",
			env:  map[string]string{"RANK": "0", "WORLD_SIZE": "1"},
			want: RankEnv{Rank: 0, Size: 1, LocalRank: 0, LocalSize: 1, Addr: "127.0.0.1:0", Source: SourceTorchrun},
		},
		{
			name: "slurm tasks per node list",
			env: map[string]string{"SLURM_PROCID": "9", "SLURM_NTASKS": "11", "SLURM_LOCALID": "1",
				"SLURM_NODEID": "2", "SLURM_TASKS_PER_NODE": "4(x2),3", "MASTER_ADDR": "n0", "MASTER_PORT": "5000"},
			want: RankEnv{Rank: 9, Size: 11, LocalRank: 1, LocalSize: 3, Node: 2, Addr: "n0:5000", Source: SourceSlurm},
		},
		{
			name: "slurm tasks per node repeated entry",
			env: map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "11", "SLURM_LOCALID": "1",
				"SLURM_NODEID": "1", "SLURM_TASKS_PER_NODE": "4(x2),3", EnvAddr: "n0:5000"},
			want: RankEnv{Rank: 5, Size: 11, LocalRank: 1, LocalSize: 4, Node: 1, Addr: "n0:5000", Source: SourceSlurm},
		},
		{
			name: "slurm ntasks per node wins",
			env: map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
				"SLURM_NODEID": "1", "SLURM_NTASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "9", EnvAddr: "n0:5000"},
			want: RankEnv{Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, Node: 1, Addr: "n0:5000", Source: SourceSlurm},
		},
		{
			name: "open mpi",
			env: map[string]string{"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "8",
				"OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", EnvAddr: "h:1"},
			want: RankEnv{Rank: 6, Size: 8, LocalRank: 2, LocalSize: 4, Node: 1, Addr: "h:1", Source: SourceOpenMPI},
		},
		{
			name: "open mpi master address",
			env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
				"MASTER_ADDR": "h", "MASTER_PORT": "3"},
			want: RankEnv{Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, Addr: "h:3", Source: SourceOpenMPI},
		},
		{
			name: "whitespace is trimmed",
			env:  map[string]string{EnvRank: " 1 ", EnvSize: "2\n", EnvAddr: "h:1"},
			want: RankEnv{Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, Addr: "h:1", Source: SourceLuacoll},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := RankEnvFromEnv(envFunc(tt.env))
			if err != nil || !ok {
				t.Fatalf("RankEnvFromEnv = ok %v, err %v", ok, err)
			}
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRankEnvFromEnvNone(t *testing.T) {
	for _, env := range []map[string]string{
		nil,
		{"PATH": "/bin", "HOME": "/root"},
		{"LOCAL_RANK": "3", "MASTER_ADDR": "x"}, // no RANK/WORLD_SIZE: not torchrun
		{"SLURM_NTASKS": "4", "SLURM_JOB_ID": "7"},
		{EnvRank: "", EnvSize: "  "},
	} {
		got, ok, err := RankEnvFromEnv(envFunc(env))
		if ok || err != nil || got != (RankEnv{}) {
			t.Errorf("env %v: got %+v, ok %v, err %v; want nothing", env, got, ok, err)
		}
	}
}

func TestRankEnvFromEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // substring of the error
	}{
		{"not an integer", map[string]string{"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, `RANK="x": not an integer`},
		{"size not an integer", map[string]string{EnvRank: "0", EnvSize: "four", EnvAddr: "h:1"}, `LUACOLL_SIZE="four": not an integer`},
		{"missing size", map[string]string{"RANK": "0", "MASTER_ADDR": "h"}, "WORLD_SIZE is not set"},
		{"missing rank", map[string]string{EnvSize: "2", EnvAddr: "h:1"}, "LUACOLL_RANK is not set"},
		{"rank too large", map[string]string{"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "h"}, `RANK="4": must be below WORLD_SIZE=4`},
		{"negative rank", map[string]string{EnvRank: "-1", EnvSize: "4", EnvAddr: "h:1"}, `LUACOLL_RANK="-1": negative`},
		{"zero size", map[string]string{EnvRank: "0", EnvSize: "0", EnvAddr: "h:1"}, `LUACOLL_SIZE="0": must be at least 1`},
		{"huge size", map[string]string{EnvRank: "0", EnvSize: "99999999", EnvAddr: "h:1"}, "more than"},
		{"local rank too large", map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "2",
			"LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h"}, `LOCAL_RANK="2": must be below LOCAL_WORLD_SIZE=2`},
		{"local size too large", map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
			"LOCAL_WORLD_SIZE": "5", "MASTER_ADDR": "h"}, "LOCAL_WORLD_SIZE=5: more than WORLD_SIZE=4"},
		{"local size without local rank", map[string]string{"RANK": "1", "WORLD_SIZE": "4",
			"LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "LOCAL_RANK is not set"},
		{"negative node", map[string]string{"RANK": "1", "WORLD_SIZE": "4", "GROUP_RANK": "-2",
			"MASTER_ADDR": "h"}, `GROUP_RANK="-2": negative`},
		{"node too large", map[string]string{EnvRank: "1", EnvSize: "2", EnvNode: "2", EnvAddr: "h:1"},
			`LUACOLL_NODE="2": must be below LUACOLL_SIZE=2`},
		{"slurm without address", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2"},
			"set LUACOLL_ADDR=host:port"},
		{"slurm without port", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "MASTER_ADDR": "h"},
			"MASTER_PORT is not set"},
		{"mpi without address", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "3"},
			"set LUACOLL_ADDR=host:port"},
		{"torchrun without address", map[string]string{"RANK": "0", "WORLD_SIZE": "3"}, "no rendezvous address"},
		{"bad master port", map[string]string{"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "h",
			"MASTER_PORT": "70000"}, `MASTER_PORT="70000": not a port number`},
		{"bad addr", map[string]string{EnvRank: "0", EnvSize: "2", EnvAddr: "nohostport"}, `LUACOLL_ADDR="nohostport"`},
		{"addr port 0", map[string]string{EnvRank: "0", EnvSize: "2", EnvAddr: "h:0"}, "port 0 works only for a single rank"},
		{"slurm bad tasks list", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
			"SLURM_TASKS_PER_NODE": "2(y3)", EnvAddr: "h:1"}, `SLURM_TASKS_PER_NODE="2(y3)": malformed entry`},
		{"slurm tasks list too short", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
			"SLURM_NODEID": "2", "SLURM_TASKS_PER_NODE": "2,1", EnvAddr: "h:1"}, "no entry for node 2"},
		{"listen fd on rank 1", map[string]string{EnvRank: "1", EnvSize: "2", EnvAddr: "h:1", EnvListenFD: "3"},
			"only rank 0 inherits the listener"},
		{"listen fd 1", map[string]string{EnvRank: "0", EnvSize: "2", EnvAddr: "h:1", EnvListenFD: "1"},
			"must be 3 or more"},
		{"listen fd garbage", map[string]string{EnvRank: "0", EnvSize: "2", EnvAddr: "h:1", EnvListenFD: "z"},
			`LUACOLL_LISTEN_FD="z": not an integer`},
		{"join fd 2", map[string]string{EnvRank: "1", EnvSize: "2", EnvAddr: "h:1", EnvJoinFD: "2"},
			`LUACOLL_JOIN_FD="2": must be 3 or more`},
		{"join fd garbage", map[string]string{EnvRank: "1", EnvSize: "2", EnvAddr: "h:1", EnvJoinFD: "z"},
			`LUACOLL_JOIN_FD="z": not an integer`},
		{"prefixed garbage", map[string]string{EnvRank: "0", EnvSize: "2", EnvAddr: "h:1", EnvPrefixed: "yes"},
			`LUACOLL_PREFIXED="yes"`},
		{"mps garbage", map[string]string{EnvRank: "0", EnvSize: "2", EnvAddr: "h:1", EnvMPS: "1"},
			`LUACOLL_MPS="1": want job or nothing`},
		{"job with slash", map[string]string{EnvRank: "0", EnvSize: "2", EnvAddr: "h:1", EnvJob: "../x"},
			`LUACOLL_JOB="../x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := RankEnvFromEnv(envFunc(tt.env))
			if err == nil {
				t.Fatalf("got %+v, want an error containing %q", got, tt.want)
			}
			if !ok {
				t.Errorf("ok = false with a launcher's variables present")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestSlurmTasksOnNode(t *testing.T) {
	list := "4(x2),3,1(x3)"
	want := []int{4, 4, 3, 1, 1, 1}
	for node, w := range want {
		got, err := slurmTasksOnNode(list, node)
		if err != nil || got != w {
			t.Errorf("node %d: got %d, %v; want %d", node, got, err, w)
		}
	}
	if _, err := slurmTasksOnNode(list, len(want)); err == nil {
		t.Errorf("node past the list: no error")
	}
	for _, bad := range []string{"", "x", "4(x0)", "4(x2", "4(2)", "-1", "4(x-1)"} {
		if _, err := slurmTasksOnNode(bad, 0); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// checkRankEnv reports what is inconsistent in an accepted RankEnv.
func checkRankEnv(e RankEnv) []string {
	var bad []string
	if e.Size < 1 || e.Rank < 0 || e.Rank >= e.Size {
		bad = append(bad, "rank/size")
	}
	if e.LocalSize < 1 || e.LocalSize > e.Size || e.LocalRank < 0 || e.LocalRank >= e.LocalSize {
		bad = append(bad, "local rank/size")
	}
	if e.Node < 0 || e.Node >= e.Size {
		bad = append(bad, "node")
	}
	if path, ok := strings.CutPrefix(e.Addr, bootstrap.UnixPrefix); ok {
		if !strings.HasPrefix(path, "/") || len(path) > maxSocketPath ||
			(e.Source != SourceOpenMPI && e.Source != SourceSlurm) {
			bad = append(bad, "unix addr")
		}
	} else if _, _, err := net.SplitHostPort(e.Addr); err != nil {
		bad = append(bad, "addr")
	}
	switch e.Source {
	case SourceLuacoll, SourceTorchrun, SourceSlurm, SourceOpenMPI:
	default:
		bad = append(bad, "source")
	}
	if e.ListenFD < 0 || (e.ListenFD > 0 && (e.ListenFD < 3 || e.Rank != 0)) {
		bad = append(bad, "listen fd")
	}
	if checkJobID(e.JobID) != nil {
		bad = append(bad, "job id")
	}
	return bad
}

func FuzzRankEnv(f *testing.F) {
	f.Add(uint8(0), "0", "4", "0", "4", "0", "127.0.0.1:1", "", "3", "1")
	f.Add(uint8(1), "5", "8", "1", "4", "1", "node0", "1234", "", "")
	f.Add(uint8(2), "9", "11", "1", "4(x2),3", "2", "n0", "5000", "", "")
	f.Add(uint8(3), "6", "8", "2", "4", "", "", "", "", "")
	f.Add(uint8(2), "0", "1", "0", "1(x99999999999)", "0", "", "", "", "")
	f.Add(uint8(4), "-1", "x", "", "", "", "[::1]:80", "0", "-3", "true")
	f.Add(uint8(2), "1", "4", "1", "", "1", "", "/scratch", "4", "")
	f.Add(uint8(3), "0", "4", "0", "1", "", "", "/scratch", "2091712513", "")
	f.Fuzz(func(t *testing.T, src uint8, rank, size, lrank, lsize, node, addr, port, fd, flag string) {
		env := map[string]string{}
		switch src % 5 {
		case 0:
			env[EnvRank], env[EnvSize], env[EnvLocalRank], env[EnvLocalSize], env[EnvNode] = rank, size, lrank, lsize, node
			env[EnvAddr], env[EnvListenFD], env[EnvPrefixed], env[EnvJob] = addr, fd, flag, port
		case 1:
			env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"] = rank, size, lrank, lsize, node
			env["MASTER_ADDR"], env["MASTER_PORT"], env[EnvListenFD] = addr, port, fd
		case 2:
			env["SLURM_PROCID"], env["SLURM_NTASKS"], env["SLURM_LOCALID"], env["SLURM_NODEID"] = rank, size, lrank, node
			env["SLURM_TASKS_PER_NODE"], env["SLURM_NTASKS_PER_NODE"] = lsize, fd
			env["MASTER_ADDR"], env["MASTER_PORT"], env[EnvAddr] = addr, port, flag
			// Without an address: the one-host meeting point.
			env["SLURM_JOB_ID"], env["SLURM_JOB_NUM_NODES"], env["TMPDIR"] = fd, node, port
		case 3:
			env["OMPI_COMM_WORLD_RANK"], env["OMPI_COMM_WORLD_SIZE"] = rank, size
			env["OMPI_COMM_WORLD_LOCAL_RANK"], env["OMPI_COMM_WORLD_LOCAL_SIZE"] = lrank, lsize
			env[EnvAddr], env["MASTER_ADDR"], env["MASTER_PORT"], env[EnvJob] = addr, node, port, flag
			env["PMIX_NAMESPACE"], env["OMPI_MCA_orte_num_nodes"], env["TMPDIR"] = fd, lsize, port
		default:
			// Everything at once: the first source must win without panics.
			for _, k := range []string{"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", EnvRank} {
				env[k] = rank
			}
			for _, k := range []string{"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", EnvSize} {
				env[k] = size
			}
			env[EnvAddr], env["MASTER_ADDR"], env["MASTER_PORT"] = addr, node, port
		}
		got, ok, err := RankEnvFromEnv(envFunc(env))
		if err != nil {
			if !ok {
				t.Fatalf("error without ok: %v", err)
			}
			if got != (RankEnv{}) {
				t.Fatalf("error %v with a non-zero result %+v", err, got)
			}
			return
		}
		if !ok {
			if got != (RankEnv{}) {
				t.Fatalf("not ok but got %+v", got)
			}
			return
		}
		if bad := checkRankEnv(got); len(bad) > 0 {
			t.Fatalf("inconsistent %v in %+v (env %v)", bad, got, env)
		}
	})
}
