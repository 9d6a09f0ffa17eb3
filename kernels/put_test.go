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
