package kernels

import (
	"errors"
	"testing"

	"github.com/luacoll/luacoll/cuda"
)

// TestPutMultiRefusesPlaces: a put to no place or to more than
// PutMultiMax fails before anything is launched.
func TestPutMultiRefusesPlaces(t *testing.T) {
	var k Kernels
	for _, n := range []int{0, PutMultiMax + 1} {
		err := k.PutMulti(nil, make([]cuda.DevicePtr, n), 1, 64)
		if !errors.Is(err, ErrBadSpec) {
			t.Errorf("%d places: err = %v, want ErrBadSpec", n, err)
		}
	}
}

// TestReduceChainRefuses: a chain of no source or too many, a bad type or
// op, or a pointer or length off 16 bytes fails before any launch.
func TestReduceChainRefuses(t *testing.T) {
	var k Kernels
	two := []cuda.DevicePtr{16, 32}
	for name, err := range map[string]error{
		"no source":        k.ReduceChain(nil, 64, nil, 4, F32, Sum),
		"too many sources": k.ReduceChain(nil, 64, make([]cuda.DevicePtr, PlanChainMax+1), 4, F32, Sum),
		"bad type":         k.ReduceChain(nil, 64, two, 4, numDTypes, Sum),
		"bad op":           k.ReduceChain(nil, 64, two, 4, F32, numRedOps),
		"dst off 16":       k.ReduceChain(nil, 72, two, 4, F32, Sum),
		"source off 16":    k.ReduceChain(nil, 64, []cuda.DevicePtr{16, 40}, 4, F32, Sum),
		"length off 16":    k.ReduceChain(nil, 64, two, 3, F32, Sum),
	} {
		if !errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: err = %v, want ErrBadSpec", name, err)
		}
	}
}
