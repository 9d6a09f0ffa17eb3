// Package cuda is a thin, typed binding of the CUDA driver API, loaded at run
// time with dlopen so that nothing from the CUDA toolkit is needed to build.
//
// Load opens libcuda.so.1, looks up cuGetProcAddress_v2 (or the older
// cuGetProcAddress) with dlsym, and resolves every other entry point through
// it by base name and an explicit ABI version (see symbolTable), so that, for
// example, cuMemAlloc asked for at version 3020 is the 64-bit cuMemAlloc_v2.
// Optional entry points that the driver lacks leave their feature
// unavailable (Driver.Has) instead of failing Load. NVLink multicast entry
// points (cuMulticast*) are never resolved.
//
// Contexts: the package uses each device's primary context. The driver's
// current context is per OS thread, so a goroutine that issues calls must
// either runtime.LockOSThread and call Context.SetCurrent once, or call
// SetCurrent before every batch of calls.
//
// Every failure is an *Error naming the call and the CUDA error name, e.g.
// "cuMemAlloc(268435456): CUDA_ERROR_OUT_OF_MEMORY".
//
// Imports: none
package cuda
