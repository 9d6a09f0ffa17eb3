// Package launchenv is the launcher's protocol: the LUACOLL_ variables
// that luacoll's launcher (`luacoll run -n N`, the REPL, --nodes) sets for
// the ranks it starts, each with what it carries, and the one place a rank
// reads them directly (Get). They are not knobs: a user does not set them
// (package knobs holds those). engine/launch builds and parses most of
// them through an injected getenv; the ones read below it (a logical
// node's identity in transport) or beside it (the script's descriptor,
// the REPL's control socket, the trace directory) go through Get.
//
// The package imports nothing of the module, so that transport, which
// cannot import engine/launch, reads LUACOLL_LOGICAL_NODE here too.
//
// Imports: none
package launchenv
