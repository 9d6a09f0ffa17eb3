// Command testsummary reads `go test -json` on standard input, prints what
// plain `go test` would (each package's result line, and the output of
// the tests that failed), and ends with one line that groups the skipped
// tests by why they skipped: "skipped 9 tests: tmux is not installed (1),
// no UCX here (5), ...". It exits 1 when a test or a package failed.
//
//	go test -json ./... | go run ./scripts/testsummary
//
// Imports: none
package main
