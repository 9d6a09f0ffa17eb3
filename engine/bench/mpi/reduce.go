package mpi

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

static void *lc_mpi_red_dlsym(void *lib, const char *name) { return dlsym(lib, name); }
static int lc_MPI_Allreduce(void *f, uintptr_t send, uintptr_t recv, int count, void *dtype, void *op, void *comm) {
	return ((int (*)(const void *, void *, int, void *, void *, void *))f)(
		(const void *)send, (void *)recv, count, dtype, op, comm);
}
static int lc_MPI_Reduce_scatter_block(void *f, uintptr_t send, uintptr_t recv, int count, void *dtype, void *op, void *comm) {
	return ((int (*)(const void *, void *, int, void *, void *, void *))f)(
		(const void *)send, (void *)recv, count, dtype, op, comm);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/luacoll/luacoll/kernels"
)

// Reductions are MPI_Allreduce and MPI_Reduce_scatter_block of one element
// type and operator, with Open MPI's predefined handles for them.
type Reductions struct {
	l                  *Library
	allreduce, rsBlock unsafe.Pointer
	dtype, op          unsafe.Pointer
	size               uint64
}

// mpiTypes are Open MPI's exported datatype objects by element type;
// f16 and bf16 have none in MPI 3.
var mpiTypes = map[kernels.DType]string{
	kernels.F32: "ompi_mpi_float", kernels.F64: "ompi_mpi_double",
	kernels.I32: "ompi_mpi_int32_t", kernels.I64: "ompi_mpi_int64_t",
	kernels.U32: "ompi_mpi_uint32_t", kernels.U64: "ompi_mpi_uint64_t",
}

var mpiOps = map[kernels.RedOp]string{
	kernels.Sum: "ompi_mpi_op_sum", kernels.Prod: "ompi_mpi_op_prod",
	kernels.Min: "ompi_mpi_op_min", kernels.Max: "ompi_mpi_op_max",
}

// Reductions resolves the reductions of t and op. A type MPI has no
// predefined handle for (f16, bf16) is an error saying so.
func (l *Library) Reductions(t kernels.DType, op kernels.RedOp) (*Reductions, error) {
	tn, ok := mpiTypes[t]
	if !ok {
		return nil, fmt.Errorf("MPI has no predefined datatype for %s", t)
	}
	r := &Reductions{l: l, size: t.Size()}
	for _, s := range []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"MPI_Allreduce", &r.allreduce}, {"MPI_Reduce_scatter_block", &r.rsBlock},
		{tn, &r.dtype}, {mpiOps[op], &r.op},
	} {
		cn := C.CString(s.name)
		*s.dst = C.lc_mpi_red_dlsym(l.lib, cn)
		C.free(unsafe.Pointer(cn))
		if *s.dst == nil {
			return nil, fmt.Errorf("%s has no %s (is it Open MPI?)", LibraryName, s.name)
		}
	}
	return r, nil
}

func (r *Reductions) count(call string, n uint64) (C.int, error) {
	if n%r.size != 0 || n/r.size > MaxCount {
		return 0, fmt.Errorf("%s: %d bytes is not a count of %d-byte elements MPI's int takes", call, n, r.size)
	}
	return C.int(n / r.size), nil
}

// Allreduce is MPI_Allreduce of n bytes on MPI_COMM_WORLD, from send (or
// InPlace) into recv: mapped memory outside the Go heap.
func (r *Reductions) Allreduce(send, recv uintptr, n uint64) error {
	cnt, err := r.count("MPI_Allreduce", n)
	if err != nil {
		return err
	}
	if rc := C.lc_MPI_Allreduce(r.allreduce, C.uintptr_t(send), C.uintptr_t(recv), cnt, r.dtype, r.op, r.l.world); rc != 0 {
		return r.l.fail("MPI_Allreduce", rc)
	}
	return nil
}

// ReduceScatterBlock is MPI_Reduce_scatter_block with n bytes a rank: send
// (or InPlace, the input then read from recv) holds size * n bytes, recv
// gets this rank's n bytes at its start.
func (r *Reductions) ReduceScatterBlock(send, recv uintptr, n uint64) error {
	cnt, err := r.count("MPI_Reduce_scatter_block", n)
	if err != nil {
		return err
	}
	if rc := C.lc_MPI_Reduce_scatter_block(r.rsBlock, C.uintptr_t(send), C.uintptr_t(recv), cnt, r.dtype, r.op, r.l.world); rc != 0 {
		return r.l.fail("MPI_Reduce_scatter_block", rc)
	}
	return nil
}
