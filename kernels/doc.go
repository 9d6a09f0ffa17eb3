// The package comment of kernels is in compile.go; this file holds the
// machine-readable list of the module's packages kernels may import,
// which the import-graph test (layers_test.go at the module root) checks.
//
// Imports: cuda

package kernels
