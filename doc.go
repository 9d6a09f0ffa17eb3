// Command luacoll runs Lua scripts of one-sided communication (windows,
// puts, signals, barriers, all-gathers) on N ranks, on the host or on GPUs.
//
// Imports: cuda, engine, engine/bench, engine/bench/plot, engine/launch, engine/plan, engine/plan/cost, engine/trace, kernels, luabind, luabind/simrank, repl, scripts, transport, transport/gpu, transport/knobs, transport/launchenv, transport/net, window
package main
