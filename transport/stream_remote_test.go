package transport

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recNet is a Network that records what the stream asks of it, and on
// which goroutine.
type recNet struct {
	mu  sync.Mutex
	log []string
	gor []string
}

func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return string(bytes.Fields(b)[1])
}

func (n *recNet) note(s string) {
	n.mu.Lock()
	n.log = append(n.log, s)
	n.gor = append(n.gor, goroutineID())
	n.mu.Unlock()
}

func (n *recNet) calls() ([]string, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.log...), append([]string(nil), n.gor...)
}

func (n *recNet) Name() string                                { return "rec" }
func (n *recNet) Address() ([]byte, error)                    { return nil, nil }
func (n *recNet) Connect(int, []byte) error                   { return nil }
func (n *recNet) Register(Addr, uint64) (Registration, error) { return nil, nil }
func (n *recNet) Unpack(int, []byte) (RemoteKey, error)       { return nil, nil }
func (n *recNet) Post(RemoteOp) error                         { n.note("post"); return nil }
func (n *recNet) Quiet(func() error, time.Duration) error     { n.note("quiet"); return nil }
func (n *recNet) Flush(func() error, time.Duration) error     { n.note("flush"); return nil }
func (n *recNet) Progress()                                   {}

type recKey struct{ n *recNet }

func (k recKey) Network() Network { return k.n }
func (k recKey) Via() string      { return "rec" }
func (k recKey) Close() error     { return nil }

// Behind a posted operation, a wait runs on the caller (it touches no
// memory the operation uses) and Sync's flush too when the stream is
// idle; a copy still waits for the posted operation to complete locally.
func TestRemoteStreamWaitAndFlushOnTheCaller(t *testing.T) {
	mem, other := sharedPages(t, 4096)
	slot, src, dst := mem, mem.Add(1024), mem.Add(2048)
	n := &recNet{}
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: time.Millisecond, Yield: 2 * time.Millisecond, Inline: time.Minute})
	defer s.Close()
	me := goroutineID()
	put := RemoteOp{Kind: RemotePutSignal, Ref: Ref{Peer: 1, Key: recKey{n}}, Local: src, N: 8, Timeout: time.Minute, What: "put_signal"}

	s.Remote(put)
	go func() {
		time.Sleep(20 * time.Millisecond)
		atomic.StoreUint64(hostU64(other), 7)
	}()
	s.Wait(WaitSpec{Slots: []Addr{slot}, Cmp: CmpEq, Value: 7, Timeout: time.Minute, Fail: noFail})
	if v := atomic.LoadUint64(hostU64(slot)); v != 7 {
		t.Fatalf("the wait's enqueue returned with the slot at %d: it did not run on the caller", v)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	log, gor := n.calls()
	if len(log) != 2 || log[0] != "post" || log[1] != "flush" {
		t.Fatalf("calls %v; want post, flush", log)
	}
	if gor[0] != me || gor[1] != me {
		t.Errorf("post and flush ran on goroutines %v; want the caller's (%s)", gor, me)
	}

	// A copy behind a posted put waits for it to complete locally.
	copy(HostBytes(src, 8), "abcdefgh")
	s.Remote(put)
	s.Copy(dst, src, 8)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if log, _ = n.calls(); len(log) != 5 || log[2] != "post" || log[3] != "quiet" || log[4] != "flush" {
		t.Fatalf("calls %v; want post, flush, then post, quiet, flush", log)
	}
	if got := string(HostBytes(dst, 8)); got != "abcdefgh" {
		t.Errorf("copy gave %q", got)
	}
}

// A Sync that reports an error still waits for the posted operations to
// complete locally (the flush was skipped with the rest): the caller may
// free their sources next.
func TestRemoteStreamErrorStillQuiets(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	n := &recNet{}
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: time.Microsecond, Yield: time.Microsecond, Inline: time.Minute})
	defer s.Close()
	s.Remote(RemoteOp{Kind: RemotePut, Ref: Ref{Peer: 1, Key: recKey{n}}, Local: mem.Add(1024), N: 8, Timeout: time.Minute, What: "put"})
	s.Wait(WaitSpec{Slots: []Addr{mem}, Cmp: CmpEq, Value: 1, Timeout: time.Millisecond, Fail: noFail})
	if err := s.Sync(context.Background()); !errors.Is(err, ErrTimeout) {
		t.Fatalf("sync: %v, want the wait's timeout", err)
	}
	log, _ := n.calls()
	if len(log) != 2 || log[0] != "post" || log[1] != "quiet" {
		t.Fatalf("calls %v; want post, then quiet although the flush was skipped", log)
	}
}

// SyncLocal waits for posted operations to complete locally (a quiet) and
// flushes nothing; a Sync after it still flushes what was posted.
func TestRemoteStreamSyncLocal(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	n := &recNet{}
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: time.Microsecond, Yield: time.Microsecond, Inline: time.Minute})
	defer s.Close()
	put := RemoteOp{Kind: RemotePut, Ref: Ref{Peer: 1, Key: recKey{n}}, Local: mem, N: 8, Timeout: time.Minute, What: "put"}
	s.Remote(put)
	if err := s.SyncLocal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if log, _ := n.calls(); len(log) != 2 || log[0] != "post" || log[1] != "quiet" {
		t.Fatalf("calls %v; want post, quiet", log)
	}
	// Nothing posted since: no second quiet.
	if err := s.SyncLocal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if log, _ := n.calls(); len(log) != 3 || log[2] != "flush" {
		t.Fatalf("calls %v; want post, quiet, flush", log)
	}
}

// With SettleOnCaller, a copy and a put_signal behind a posted put run on
// the caller, after the put's local completion (a quiet, on the caller
// too), and have landed when the enqueue returns.
func TestRemoteStreamSettleOnCaller(t *testing.T) {
	mem, _ := sharedPages(t, 4096)
	slot, src, dst, dst2 := mem, mem.Add(1024), mem.Add(2048), mem.Add(3072)
	n := &recNet{}
	s := NewHostStream(NewAbort(), WaitPolicy{Spin: time.Microsecond, Yield: time.Microsecond, Inline: time.Minute})
	defer s.Close()
	s.SettleOnCaller()
	me := goroutineID()
	copy(HostBytes(src, 8), "abcdefgh")
	s.Remote(RemoteOp{Kind: RemotePut, Ref: Ref{Peer: 1, Key: recKey{n}}, Local: src, N: 8, Timeout: time.Minute, What: "put"})
	s.Copy(dst, src, 8)
	if got := string(HostBytes(dst, 8)); got != "abcdefgh" {
		t.Fatalf("the copy's enqueue returned with %q at its destination: it did not run on the caller", got)
	}
	s.Remote(RemoteOp{Kind: RemotePut, Ref: Ref{Peer: 1, Key: recKey{n}}, Local: src, N: 8, Timeout: time.Minute, What: "put"})
	s.PutSignalRing(dst2, src, 8, slot, false, 9, 0)
	if v := atomic.LoadUint64(hostU64(slot)); v != 9 || string(HostBytes(dst2, 8)) != "abcdefgh" {
		t.Fatalf("after the put_signal's enqueue: slot %d, data %q; want 9 and the data (run on the caller)", v, HostBytes(dst2, 8))
	}
	if err := s.SyncLocal(context.Background()); err != nil {
		t.Fatal(err)
	}
	log, gor := n.calls()
	want := []string{"post", "quiet", "post", "quiet"}
	if len(log) != len(want) {
		t.Fatalf("calls %v; want %v", log, want)
	}
	for i := range want {
		if log[i] != want[i] || gor[i] != me {
			t.Fatalf("calls %v on goroutines %v; want %v, all on the caller (%s)", log, gor, want, me)
		}
	}
}
