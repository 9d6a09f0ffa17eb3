// Package knobs is the registry of luacoll's knobs: the LUACOLL_
// environment variables a user sets to tune a run (class tuning) or to
// look into one (class debug). Each knob has a name, the default that
// applies when it is unset, a unit, one line of doc and a class; the
// process reads its environment once (Current), refuses a value a knob
// cannot take with an error naming the variable, and the values in effect
// are what `luacoll info --tuning` lists. The docs' table (docs/tuning.md)
// is generated from the registry (Markdown).
//
// The variables luacoll's launcher passes to its ranks (LUACOLL_RANK,
// LUACOLL_ADDR, ...) are its protocol, not knobs: package launchenv names
// and reads them.
//
// The package imports nothing of the module, so that every layer that
// reads a knob (transport and its backends, the all-gather, luabind, the
// command) may import it without an import pointing up; cuda and kernels
// do not import it: their callers pass the values as options.
//
// Imports: none
package knobs
