// Package scripts embeds the Lua scripts that ship with luacoll: examples/
// (the tour), lib/ (schedules loadable with require) and bench/.
//
// Imports: none
package scripts
