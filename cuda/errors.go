package cuda

import (
	"errors"
	"fmt"
)

// Error is a failed CUDA driver call. Call names the entry point and, where
// useful, its arguments, e.g. "cuMemAlloc(268435456)"; Code is the CUresult
// and Name its symbolic name as reported by cuGetErrorName, e.g.
// "CUDA_ERROR_OUT_OF_MEMORY".
type Error struct {
	Call string
	Code int
	Name string
}

// Error formats the error as "call: NAME".
func (e *Error) Error() string {
	return e.Call + ": " + e.Name
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, &cuda.Error{Code: cuda.ErrorOutOfMemory}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Call == "" || t.Call == e.Call)
}

// CUresult values that callers commonly test for.
const (
	ErrorInvalidValue             = 1
	ErrorOutOfMemory              = 2
	ErrorNotInitialized           = 3
	ErrorDeinitialized            = 4
	ErrorNoDevice                 = 100
	ErrorInvalidDevice            = 101
	ErrorInvalidContext           = 201
	ErrorNotFound                 = 500
	ErrorNotReady                 = 600
	ErrorPeerAccessAlreadyEnabled = 704
	ErrorNotSupported             = 801
	ErrorStreamCaptureUnsupported = 900
	ErrorStreamCaptureInvalidated = 901
	ErrorLaunchFailed             = 719
	ErrorIllegalAddress           = 700
	ErrorSharedObjectInitFailed   = 303
	ErrorUnsupportedPtxVersion    = 222
	ErrorNoBinaryForGPU           = 209
	ErrorInvalidImage             = 200
	ErrorPeerAccessUnsupported    = 217
	ErrorSystemDriverMismatch     = 803
)

// knownNames backs up cuGetErrorName for the few codes this package reports
// before (or without) a working driver.
var knownNames = map[int]string{
	0:                             "CUDA_SUCCESS",
	ErrorInvalidValue:             "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:              "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:           "CUDA_ERROR_NOT_INITIALIZED",
	ErrorDeinitialized:            "CUDA_ERROR_DEINITIALIZED",
	ErrorNoDevice:                 "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidDevice:            "CUDA_ERROR_INVALID_DEVICE",
	ErrorInvalidContext:           "CUDA_ERROR_INVALID_CONTEXT",
	ErrorNotFound:                 "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:                 "CUDA_ERROR_NOT_READY",
	ErrorPeerAccessAlreadyEnabled: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	ErrorNotSupported:             "CUDA_ERROR_NOT_SUPPORTED",
	ErrorSystemDriverMismatch:     "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
}

// errorName returns the symbolic name of a CUresult, falling back to a small
// built-in table and then to "CUDA_ERROR_<code>".
func errorName(viaDriver func(int) string, code int) string {
	if viaDriver != nil {
		if s := viaDriver(code); s != "" {
			return s
		}
	}
	if s, ok := knownNames[code]; ok {
		return s
	}
	return fmt.Sprintf("CUDA_ERROR_%d", code)
}

// ErrNoDriver is wrapped by Load when libcuda.so.1 cannot be opened or lacks
// cuGetProcAddress: there is no usable NVIDIA driver on this machine.
var ErrNoDriver = errors.New("CUDA driver not available")

// ErrUnavailable is wrapped by calls to a driver entry point that is
// optional and that this driver does not provide.
var ErrUnavailable = errors.New("not provided by this CUDA driver")

// IsCode reports whether err is (or wraps) an *Error with the given CUresult.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
