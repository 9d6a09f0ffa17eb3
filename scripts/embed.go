// Package scripts embeds the Lua scripts that ship with luacoll: examples/
// (the tour), lib/ (schedules loadable with require) and bench/.
package scripts

import "embed"

// FS holds examples/, lib/, bench/ and tests/ (the window suite).
//
//go:embed examples lib bench tests
var FS embed.FS
