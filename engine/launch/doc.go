// Package launch starts the ranks of a job and tells a rank who it is.
//
// Launch runs N copies of an executable with the LUACOLL_* variables,
// hands rank 0 the listening socket of the rendezvous, passes whole output
// lines on with a [rank] prefix, reports the first failure, kills
// stragglers and sweeps the job's shared-memory segments. RankEnvFromEnv
// reads a rank's identity from luacoll's own variables or from torchrun,
// Slurm and Open MPI. cpubind.go names the CPU binding modes; the cpuset
// sub-package parses, formats and shares out CPU lists.
//
// It imports bootstrap (job ids, the rank limit) and nothing else of the
// engine.
package launch
