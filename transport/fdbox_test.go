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

func openBoxes(t *testing.T, n int) []*FDBox {
	t.Helper()
	job := fmt.Sprintf("fdt%d", time.Now().UnixNano())
	boxes := make([]*FDBox, n)
	for r := range boxes {
		b, err := OpenFDBox(job, r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		boxes[r] = b
	}
	return boxes
}

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func mustSend(t *testing.T, b *FDBox, peer int, tag uint64, fd int) {
	t.Helper()
	if ok, err := b.TrySend(peer, tag, fd); err != nil || !ok {
		t.Fatalf("send to %d, tag %d: %v, %v", peer, tag, ok, err)
	}
}

// Descriptors pass between two boxes of one job whatever order they come
// in; each is a working duplicate.
func TestFDBox(t *testing.T) {
	boxes := openBoxes(t, 2)
	a, b := boxes[0], boxes[1]
	if _, err := OpenFDBox(a.job, 1); err == nil || !strings.Contains(err.Error(), "bind") {
		t.Errorf("a second box of rank 1: %v", err)
	}
	r8, w8 := pipe(t)
	r7, w7 := pipe(t)
	// Tag 8 goes first, tag 7 is asked for first.
	mustSend(t, a, 1, 8, int(w8.Fd()))
	mustSend(t, a, 1, 7, int(w7.Fd()))
	ctx := context.Background()
	for _, c := range []struct {
		tag uint64
		r   *os.File
	}{{7, r7}, {8, r8}} {
		fd, err := b.Recv(ctx, 0, c.tag, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("through tag %d", c.tag)
		if _, err := unix.Write(fd, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		buf := make([]byte, 64)
		n, err := c.r.Read(buf)
		if err != nil || string(buf[:n]) != msg {
			t.Errorf("tag %d: read %q, %v; want %q", c.tag, buf[:n], err, msg)
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
	if _, err := a.TrySend(5, 1, int(w7.Fd())); err == nil || !strings.Contains(err.Error(), "rank 5") {
		t.Errorf("send to a missing box: %v", err)
	}
}

// A full queue refuses a send at once instead of blocking; taking in what
// is queued lets it through. The first descriptor for a (rank, tag) is
// kept, a second one closed.
func TestFDBoxFullQueue(t *testing.T) {
	boxes := openBoxes(t, 2)
	a, b := boxes[0], boxes[1]
	_, w := pipe(t)
	sent := 0
	for ; sent < 1000; sent++ {
		ok, err := a.TrySend(1, uint64(sent), int(w.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if sent == 0 || sent == 1000 {
		t.Fatalf("%d sends went through before the queue was full", sent)
	}
	if err := b.Pump(100); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.TrySend(1, uint64(sent), int(w.Fd())); err != nil || !ok {
		t.Fatalf("send after the queue was emptied: %v, %v", ok, err)
	}
	r2, w2 := pipe(t)
	mustSend(t, a, 1, uint64(sent), int(w2.Fd())) // the same (rank, tag) again
	if err := b.Pump(100); err != nil {
		t.Fatal(err)
	}
	fd, ok := b.Take(0, uint64(sent))
	if !ok {
		t.Fatal("the descriptor sent after the queue emptied is missing")
	}
	unix.Close(fd)
	// The duplicate was closed on arrival: the pipe's only writer left is w2.
	w2.Close()
	r2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := r2.Read(make([]byte, 1)); n != 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the duplicate stayed open: read %d, %v", n, err)
	}
}

// Discard closes what an exchange left behind, queued or held, up to its
// tag; Close closes the rest; nothing is taken after Close.
func TestFDBoxDiscardAndClose(t *testing.T) {
	boxes := openBoxes(t, 2)
	a, b := boxes[0], boxes[1]
	readers := map[uint64]*os.File{}
	for _, tag := range []uint64{3, 4, 5} {
		r, w := pipe(t)
		mustSend(t, a, 1, tag, int(w.Fd()))
		w.Close()
		readers[tag] = r
	}
	if err := b.Pump(100); err != nil { // holds 3 (and what else is queued)
		t.Fatal(err)
	}
	b.Discard(4) // takes in the rest, closes 3 and 4
	closed := func(tag uint64) bool {
		r := readers[tag]
		r.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := r.Read(make([]byte, 1))
		return n == 0 && err != nil && !strings.Contains(err.Error(), "timeout")
	}
	if !closed(3) || !closed(4) || closed(5) {
		t.Errorf("after Discard(4): 3 closed %v, 4 closed %v, 5 closed %v; want true, true, false", closed(3), closed(4), closed(5))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !closed(5) {
		t.Error("Close left tag 5's descriptor open")
	}
	if _, err := b.Recv(context.Background(), 0, 5, time.Second); err == nil {
		t.Error("Recv after Close")
	}
}
