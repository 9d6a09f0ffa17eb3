package cuda

/*
#include "lc_cuda.h"

typedef void *lc_nccl_red_comm; // ncclComm_t

static inline int lc_ncclAllReduce(void *f, lc_dptr send, lc_dptr recv, size_t count, int dtype, int op, void *comm, void *stream) {
	return ((int (*)(const void *, void *, size_t, int, int, lc_nccl_red_comm, void *))f)(
		(const void *)(uintptr_t)send, (void *)(uintptr_t)recv, count, dtype, op, comm, stream);
}
static inline int lc_ncclReduceScatter(void *f, lc_dptr send, lc_dptr recv, size_t count, int dtype, int op, void *comm, void *stream) {
	return ((int (*)(const void *, void *, size_t, int, int, lc_nccl_red_comm, void *))f)(
		(const void *)(uintptr_t)send, (void *)(uintptr_t)recv, count, dtype, op, comm, stream);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// NCCL data types (ncclDataType_t) of the reductions' element types.
const (
	NCCLInt32    = 2
	NCCLUint32   = 3
	NCCLInt64    = 4
	NCCLUint64   = 5
	NCCLFloat16  = 6
	NCCLFloat32  = 7
	NCCLFloat64  = 8
	NCCLBfloat16 = 9
)

// NCCL reduction operators (ncclRedOp_t).
const (
	NCCLSum  = 0
	NCCLProd = 1
	NCCLMax  = 2
	NCCLMin  = 3
)

// ncclReduceFuncs resolves ncclAllReduce and ncclReduceScatter once.
func (n *NCCL) ncclReduceFuncs() (allReduce, reduceScatter unsafe.Pointer, err error) {
	for _, s := range []struct {
		name string
		dst  *unsafe.Pointer
	}{{"ncclAllReduce", &allReduce}, {"ncclReduceScatter", &reduceScatter}} {
		cname := C.CString(s.name)
		*s.dst = C.lc_dlsym(n.lib, cname)
		C.free(unsafe.Pointer(cname))
		if *s.dst == nil {
			return nil, nil, fmt.Errorf("NCCL (%s) lacks %s", NCCLLibrary, s.name)
		}
	}
	return allReduce, reduceScatter, nil
}

// NCCLReduction is ncclAllReduce or ncclReduceScatter of one element type
// and operator on a communicator.
type NCCLReduction struct {
	c                        *NCCLComm
	allReduce, reduceScatter unsafe.Pointer
	dtype, op                int
}

// Reduction binds the reductions of NCCL data type dtype and operator op
// (the constants above) on c.
func (c *NCCLComm) Reduction(dtype, op int) (*NCCLReduction, error) {
	ar, rs, err := c.n.ncclReduceFuncs()
	if err != nil {
		return nil, err
	}
	return &NCCLReduction{c: c, allReduce: ar, reduceScatter: rs, dtype: dtype, op: op}, nil
}

// AllReduce enqueues ncclAllReduce of count elements on s (send == recv:
// in place).
func (r *NCCLReduction) AllReduce(send, recv DevicePtr, count uint64, s *Stream) error {
	if rc := C.lc_ncclAllReduce(r.allReduce, C.lc_dptr(send), C.lc_dptr(recv), C.size_t(count), C.int(r.dtype), C.int(r.op), r.c.h, s.handle()); rc != 0 {
		return r.c.n.fail(rc, fmt.Sprintf("ncclAllReduce(count %d)", count), r.c.h)
	}
	return nil
}

// ReduceScatter enqueues ncclReduceScatter with recvCount elements a rank
// on s (in place: recv = send + rank * recvCount elements).
func (r *NCCLReduction) ReduceScatter(send, recv DevicePtr, recvCount uint64, s *Stream) error {
	if rc := C.lc_ncclReduceScatter(r.reduceScatter, C.lc_dptr(send), C.lc_dptr(recv), C.size_t(recvCount), C.int(r.dtype), C.int(r.op), r.c.h, s.handle()); rc != 0 {
		return r.c.n.fail(rc, fmt.Sprintf("ncclReduceScatter(recvcount %d)", recvCount), r.c.h)
	}
	return nil
}
