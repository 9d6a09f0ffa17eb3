package transport

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Descriptors pass between two boxes of one job whatever order they come
// in; each is a working duplicate; nothing is left open after Close.
func TestFDBox(t *testing.T) {
	job := fmt.Sprintf("fdt%d", time.Now().UnixNano())
	a, err := OpenFDBox(job, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenFDBox(job, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFDBox(job, 1); err == nil || !strings.Contains(err.Error(), "bind") {
		t.Errorf("a second box of rank 1: %v", err)
	}
	pipes := make([][2]*os.File, 2)
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		pipes[i] = [2]*os.File{r, w}
	}
	// Tag 8 goes first, tag 7 is asked for first.
	for i, tag := range []uint64{8, 7} {
		if err := a.Send(1, tag, int(pipes[i][1].Fd())); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for i, tag := range []uint64{7, 8} {
		fd, err := b.Recv(ctx, 0, tag, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("through tag %d", tag)
		if _, err := unix.Write(fd, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		buf := make([]byte, 64)
		n, err := pipes[1-i][0].Read(buf)
		if err != nil || string(buf[:n]) != msg {
			t.Errorf("pipe %d read %q, %v; want %q", 1-i, buf[:n], err, msg)
		}
	}
	// Nothing sent: the wait ends at its timeout, or when ctx ends.
	start := time.Now()
	if _, err := b.Recv(ctx, 0, 9, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "none came within") {
		t.Errorf("timeout: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout after %v", d)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Recv(cctx, 0, 9, time.Minute); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled: %v", err)
	}
	// A rank without a box cannot be sent to.
	if err := a.Send(5, 1, int(pipes[0][1].Fd())); err == nil || !strings.Contains(err.Error(), "rank 5") {
		t.Errorf("send to a missing box: %v", err)
	}
	// A descriptor held at Close is closed: the pipe sees its writer go.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := a.Send(1, 10, int(w.Fd())); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := b.receive(1000); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(ctx, 0, 10, time.Second); err == nil {
		t.Error("Recv after Close")
	}
	r.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := r.Read(make([]byte, 1)); n != 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the held writer stayed open: read %d, %v", n, err)
	}
}
