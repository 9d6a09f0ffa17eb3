// Package enginetest opens jobs of ranks that are goroutines of one test
// process, for the tests of engine, its sub-packages and the layers above.
// It is imported only by tests.
//
// Imports: engine, engine/bootstrap, engine/launch, transport, transport/inproc
package enginetest
