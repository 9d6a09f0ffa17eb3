// Package repl is `luacoll repl`: one prompt driving N ranks. The front
// end starts the ranks with the engine's launcher; each rank (a worker,
// see Serve) opens its Comm, makes a Lua state and connects back to the
// front end over a unix socket named in EnvControl. Every chunk typed at
// the prompt is sent to the chosen ranks; their answers come back and are
// shown grouped by rank, identical answers once ("[0-3] 42").
//
// Ctrl-C interrupts the running chunk on every rank (its context ends and
// the rank's stream fails its current wait); a second Ctrl-C kills ranks
// that do not stop. A rank that dies is reported together with what still
// works, and the session goes on with the others. Ctrl-\ (SIGQUIT, which
// the launcher passes on) makes each rank print its Lua traceback and the
// wait it was in, with its Go stacks in a file, and exit; the session then
// ends, as luacoll run does. Ctrl-D, the end of the input or :quit end the
// session: the ranks say goodbye, and any that do not are stopped, so that
// no process and no shared memory is left.
//
// Imports: engine, engine/launch, luabind
package repl
