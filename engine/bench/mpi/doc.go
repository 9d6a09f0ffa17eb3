// Package mpi opens Open MPI's libmpi.so.40 at run time (dlopen) for the
// benchmarks' MPI baseline: nothing of MPI is needed to build, and a
// machine without it gets an error naming the package to install.
//
// The declarations below are written by hand for Open MPI's ABI, where
// MPI_Comm and MPI_Datatype are pointers to structures and the predefined
// handles are the addresses of exported objects: MPI_COMM_WORLD is
// &ompi_mpi_comm_world, MPI_BYTE &ompi_mpi_byte, MPI_ERRORS_RETURN
// &ompi_mpi_errors_return, and MPI_IN_PLACE is (void *)1.
//
// MPI is initialised as MPI_THREAD_SERIALIZED: the calls of one process
// never overlap, but a goroutine may make them from any OS thread (no
// runtime.LockOSThread, which would make every hand-over of the
// goroutine's processor a switch between threads).
//
// Imports: kernels
package mpi
