// Package engine is a rank's world: launcher, bootstrap, rank environment
// and the communicator built on them.
package engine
