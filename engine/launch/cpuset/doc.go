// Package cpuset reads, writes and plans CPU affinity: the kernel's CPU list
// format ("0-3,8,10-11"), the split of a host's CPUs among the ranks that
// share it, and the binding of every thread of this process.
//
// Imports: none
package cpuset
