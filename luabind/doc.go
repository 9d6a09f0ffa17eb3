// Package luabind is luacoll's Lua face: one registry of functions and
// methods, each with its doc string, from which the luacoll module, the
// method tables, help(), REPL completion and docs/lua-api.md are all made.
// Arguments are checked here (types, integers up to 2^53, freed objects)
// and by the window layer (ranges) before anything is enqueued.
//
// Imports: engine, engine/allgather, engine/bootstrap, engine/launch, engine/launch/cpuset, engine/plan, engine/plan/cost, engine/plan/verify, scripts, transport, transport/inproc, transport/knobs, window
package luabind
