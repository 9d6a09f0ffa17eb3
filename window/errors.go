package window

import "fmt"

// ArgError is bad input refused before anything is enqueued. Arg is the
// argument's name as the Lua API spells it.
type ArgError struct {
	Arg string
	Msg string
}

func (e *ArgError) Error() string { return fmt.Sprintf("bad argument '%s': %s", e.Arg, e.Msg) }

func argErr(arg, format string, a ...any) error {
	return &ArgError{Arg: arg, Msg: fmt.Sprintf(format, a...)}
}

// ErrFreed is returned for any use of a freed buffer, window or other object.
type ErrFreed struct{ What string }

func (e *ErrFreed) Error() string { return e.What + " has been freed" }

// checkRange verifies off+n <= size for the argument pair named offArg/nArg.
// inRange reports whether n bytes at off fit in size.
func inRange(off, n, size uint64) bool { return off <= size && n <= size-off }

func checkRange(offArg, nArg string, off, n, size uint64, what string) error {
	if off > size {
		return argErr(offArg, "offset %d is past the end of %s (%d bytes)", off, what, size)
	}
	if n > size-off {
		return argErr(nArg, "%d bytes at offset %d run past the end of %s (%d bytes)", n, off, what, size)
	}
	return nil
}
