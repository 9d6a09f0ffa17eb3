// Package scripts embeds the Lua scripts that ship with luacoll: examples/
// (the tour), lib/ (schedules loadable with require) and bench/.
package scripts

import "embed"

// FS holds examples/, lib/ and bench/.
//
//go:embed examples lib bench
var FS embed.FS
