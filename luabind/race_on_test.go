//go:build race

package luabind

// raceOn says the race detector is on: the slowest cases shrink.
const raceOn = true
