package luabind

import (
	"context"
	"fmt"
	"io"
)

// ReadScriptContext is ReadScript that gives up when ctx ends: opening a
// FIFO that no process writes, or reading a terminal, blocks in the
// kernel where no signal reaches it, so the read runs on a goroutine that
// is abandoned then (the process is about to exit). The error wraps ctx's
// cause.
func ReadScriptContext(ctx context.Context, path string, stdin io.Reader) ([]byte, string, error) {
	type result struct {
		src  []byte
		name string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		src, name, err := ReadScript(path, stdin)
		done <- result{src, name, err}
	}()
	select {
	case r := <-done:
		return r.src, r.name, r.err
	case <-ctx.Done():
		what := path
		if path == "-" {
			what = "standard input"
		}
		return nil, "", fmt.Errorf("reading the script from %s: %w", what, context.Cause(ctx))
	}
}
