// Package inproc provides an in-process Exchanger: a job whose ranks are
// goroutines of one process (tests, and single-process tools).
//
// Imports: none
package inproc
