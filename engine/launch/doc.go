// Package launch starts the ranks of a job and tells a rank who it is.
//
// Launch runs N copies of an executable with the LUACOLL_* variables,
// hands rank 0 the listening socket of the rendezvous, passes whole output
// lines on with a [rank] prefix, reports the first failure, kills
// stragglers and sweeps the job's shared-memory segments. RankEnvFromEnv
// reads a rank's identity from luacoll's own variables or from torchrun,
// Slurm and Open MPI; meet.go derives the meeting point of a one-host
// mpirun or srun job that names no address. mps.go decides whether a job
// whose ranks share a GPU gets its own MPS control daemon, and runs it.
// cpubind.go names the CPU binding modes; the cpuset sub-package parses,
// formats and shares out CPU lists.
//
// It imports bootstrap (job ids, the rank limit) and nothing else of the
// engine.
//
// Imports: engine/bootstrap, engine/launch/cpuset, transport
package launch
