package net

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/knobs"
)

func TestParseLanes(t *testing.T) {
	text := `#
# UCP endpoint
#
#               peer: <no debug data>
#                 lane[0]:  2:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] am am_bw#0 keepalive wireup
#                 lane[1]:  1:tcp/eth0.0 md[1]              -> md[1]/tcp/sysdev[255] rma_bw#0
#                 lane[2]:  2:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] amo
#
#                  rma_bw: mds #
`
	got := strings.Join(parseLanes(text), ",")
	if got != "tcp/eth0,tcp/lo" {
		t.Errorf("parseLanes = %q", got)
	}
	if l := parseLanes("nothing here"); len(l) != 0 {
		t.Errorf("parseLanes(nothing) = %v", l)
	}
}

func TestParseResources(t *testing.T) {
	text := `#            md 0  :  component 0  self
#      resource 0  :  md 0  dev 0  flags -- self/memory0
#      resource 1  :  md 1  dev 1  flags -- tcp/eth0
#      resource 2  :  md 1  dev 2  flags -- tcp/lo
`
	got := parseResources(text)
	want := []Resource{{"self", "memory0"}, {"tcp", "eth0"}, {"tcp", "lo"}}
	if len(got) != len(want) {
		t.Fatalf("parseResources = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("resource %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// A peer's address or key that is cut short, damaged or foreign is refused
// with what is wrong, before UCX sees it.
func TestUnsealRefusesBadBytes(t *testing.T) {
	good := seal([]byte("worker address bytes"))
	if b, err := unseal(good, "address"); err != nil || string(b) != "worker address bytes" {
		t.Fatalf("unseal(seal) = %q, %v", b, err)
	}
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)-1] ^= 1
	foreign := append([]byte(nil), good...)
	foreign[0] ^= 1
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"truncated", good[:len(good)-3], "truncated"},
		{"damaged", damaged, "damaged"},
		{"foreign", foreign, "not a UCX address"},
	} {
		_, err := unseal(c.b, "address")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: unseal = %v, want %q", c.name, err, c.want)
		}
	}
}

func FuzzUnseal(f *testing.F) {
	f.Add(seal([]byte("abc")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := unseal(b, "key")
		if err == nil && string(seal(body)) != string(b) {
			t.Fatalf("unseal accepted %x, which seal does not produce", b)
		}
	})
}

func TestDescribe(t *testing.T) {
	if _, err := Load(); err != nil {
		t.Skipf("no UCX here: %v", err)
	}
	t.Setenv("UCX_TLS", "tcp")
	info, err := Describe()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version == "" || len(info.Resources) == 0 {
		t.Fatalf("Describe = %+v", info)
	}
	for _, r := range info.Resources {
		if r.Transport != "tcp" {
			t.Errorf("UCX_TLS=tcp, resource %v", r)
		}
	}
}

// Connect and Unpack refuse peers' bad bytes with the peer's rank.
func TestConnectRefusesBadAddress(t *testing.T) {
	if _, err := Load(); err != nil {
		t.Skipf("no UCX here: %v", err)
	}
	n := New(0, 2)
	defer n.Close()
	if _, err := n.Address(); err != nil {
		t.Fatal(err)
	}
	err := n.Connect(1, []byte("garbage"))
	if err == nil || !strings.Contains(err.Error(), "rank 1's address") {
		t.Errorf("Connect(garbage) = %v", err)
	}
	if _, err := n.Unpack(1, seal([]byte("0123456789"))); err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("Unpack without an endpoint = %v", err)
	}
}

// Without the library, the error says what to install.
func TestMissingLibraryNamesThePackage(t *testing.T) {
	_, err := loadFrom("libucs-not-here.so.0", "libucp-not-here.so.0")
	if err == nil || !strings.Contains(err.Error(), "apt-get install libucx0") || !strings.Contains(err.Error(), "libucs-not-here.so.0") {
		t.Fatalf("loadFrom(missing) = %v", err)
	}
}

// pair connects two networks of one process, each with a registered page.
func pair(t *testing.T) (ns [2]*Transport, keys [2]transport.RemoteKey, mem [2][]byte) {
	t.Helper()
	return pairN(t, 4096)
}

// pairN is pair with size bytes registered on each side.
func pairN(t *testing.T, size int) (ns [2]*Transport, keys [2]transport.RemoteKey, mem [2][]byte) {
	t.Helper()
	if _, err := Load(); err != nil {
		t.Skipf("no UCX here: %v", err)
	}
	t.Setenv("UCX_TLS", "tcp")
	var addrs, packed [2][]byte
	for i := range ns {
		ns[i] = New(i, 2)
		t.Cleanup(func() { ns[i].Close() })
		var err error
		if mem[i], err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(mem[i]) })
		if addrs[i], err = ns[i].Address(); err != nil {
			t.Fatal(err)
		}
		r, err := ns[i].Register(transport.AddrOf(mem[i]), uint64(size))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		packed[i] = r.Packed()
	}
	for i := range ns {
		if err := ns[i].Connect(1-i, addrs[1-i]); err != nil {
			t.Fatal(err)
		}
		k, err := ns[i].Unpack(1-i, packed[1-i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		keys[i] = k
	}
	return ns, keys, mem
}

// A put_signal lands its data, then its signal; Flush returns once both
// are at the target; one over amMax goes as put + fenced signal.
func TestPutSignalMessage(t *testing.T) {
	ns, keys, mem := pair(t)
	src := transport.AddrOf(mem[0][2048:])
	for i := range 2048 {
		mem[0][2048+i] = byte(i * 3)
	}
	for _, n := range []uint64{8, 1000} {
		op := transport.RemoteOp{Kind: transport.RemotePutSignal, Ref: transport.Ref{Peer: 1, Key: keys[0], Off: 1024}, Local: src, N: n,
			SigOff: 8, SigAdd: true, Value: 5, What: "test put_signal", Timeout: 5 * time.Second}
		if err := ns[0].Post(op); err != nil {
			t.Fatal(err)
		}
		if err := ns[0].Flush(nil, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if string(mem[1][1024:1024+n]) != string(mem[0][2048:2048+n]) {
			t.Errorf("%d bytes: data differs after the flush", n)
		}
	}
	if got := binary.LittleEndian.Uint64(mem[1][8:]); got != 10 {
		t.Errorf("signal = %d after two adds of 5, want 10", got)
	}
}

// A message aimed outside the target's windows is dropped, and the target
// reports the sender.
func TestMalformedPutSignalNamesThePeer(t *testing.T) {
	ns, keys, mem := pair(t)
	k := keys[0].(*key)
	forged := &key{t: k.t, ep: k.ep, rkey: k.rkey, base: k.base + 1<<30}
	op := transport.RemoteOp{Kind: transport.RemotePutSignal, Ref: transport.Ref{Peer: 1, Key: forged}, Local: transport.AddrOf(mem[0]), N: 8,
		SigOff: 8, Value: 1, What: "forged", Timeout: time.Second}
	if err := ns[0].Post(op); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		ns[1].Progress()
		err = ns[1].Quiet(nil, time.Second)
	}
	if err == nil || !strings.Contains(err.Error(), "rank 0 sent a malformed put_signal message (an address outside this rank's windows)") {
		t.Fatalf("target: %v", err)
	}
	if binary.LittleEndian.Uint64(mem[1][8:]) != 0 {
		t.Error("the forged message changed the target's memory")
	}
	// The sender learns that its message was dropped; what it sends after
	// it is dropped too (it might be the signal for the lost data).
	if err := ns[0].Flush(nil, 5*time.Second); err == nil || !strings.Contains(err.Error(), "rank 1 dropped a put or signal message") {
		t.Fatalf("sender's flush: %v", err)
	}
	ok := transport.RemoteOp{Kind: transport.RemotePutSignal, Ref: transport.Ref{Peer: 1, Key: keys[0]}, Local: transport.AddrOf(mem[0]), N: 8,
		SigOff: 8, Value: 1, What: "after", Timeout: time.Second}
	if err := ns[0].Post(ok); err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("a put_signal after the dropped one: %v", err)
	}
}

// The statuses of a broken connection match transport.ErrPeerLost (so the
// stream waits for the failure news that explains them); others do not.
func TestErrorPeerLost(t *testing.T) {
	for _, c := range []struct {
		status int
		lost   bool
	}{{-25, true}, {-80, true}, {-6, true}, {-16, true}, {-5, false}, {-4, false}, {-20, false}} {
		err := fmt.Errorf("flush to rank 1: %w", &Error{Call: "ucp_ep_flush_nbx", Status: c.status, Msg: "x"})
		if got := errors.Is(err, transport.ErrPeerLost); got != c.lost {
			t.Errorf("status %d: errors.Is(ErrPeerLost) = %v, want %v", c.status, got, c.lost)
		}
	}
}

// Large puts go by rendezvous straight into the target's window, and what
// follows them to the same peer lands after them: a signal (store, add or
// a small put_signal) is applied only once the data is there, a get reads
// it, and a flush returns once the target acknowledged them.
func TestRendezvousPutsLandInOrder(t *testing.T) {
	const half = 4 << 20
	ns, keys, mem := pairN(t, 2*half)
	src := transport.AddrOf(mem[0][half:])
	slot := func(off int) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[1][off]))) }
	waitSlot := func(off int, want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for slot(off) != want {
			if time.Now().After(deadline) {
				t.Fatalf("slot %d = %d, want %d", off, slot(off), want)
			}
			ns[0].Progress()
		}
	}
	const sig = 2*half - 64
	for round, kind := range []transport.RemoteKind{transport.RemoteStore64, transport.RemoteAdd64, transport.RemotePutSignal} {
		for i := range half {
			mem[0][half+i] = byte(i*7 + round*13 + i>>12)
		}
		n := uint64(half - 4096)
		put := transport.RemoteOp{Kind: transport.RemotePut, Ref: transport.Ref{Peer: 1, Key: keys[0]}, Local: src, N: n,
			What: "big put", Timeout: 10 * time.Second}
		if err := ns[0].Post(put); err != nil {
			t.Fatal(err)
		}
		s := transport.RemoteOp{Kind: kind, Ref: transport.Ref{Peer: 1, Key: keys[0], Off: sig}, Value: uint64(round + 1),
			What: "signal", Timeout: 10 * time.Second}
		want := uint64(round + 1)
		switch kind {
		case transport.RemoteAdd64:
			s.Value, want = 1, uint64(round+1)
		case transport.RemotePutSignal:
			s.Ref.Off, s.Local, s.N, s.SigOff, s.SigAdd, s.Value = sig+8, src, 8, sig, true, 1
		}
		if err := ns[0].Post(s); err != nil {
			t.Fatal(err)
		}
		waitSlot(sig, want)
		if string(mem[1][:n]) != string(mem[0][half:half+int(n)]) {
			t.Fatalf("round %d (%v): the signal landed before the put's data", round, kind)
		}
		if err := ns[0].Flush(nil, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// A put_signal by rendezvous, then a get of what it wrote.
	ps := transport.RemoteOp{Kind: transport.RemotePutSignal, Ref: transport.Ref{Peer: 1, Key: keys[0], Off: 4096}, Local: src, N: 1 << 20,
		SigOff: sig + 16, Value: 9, What: "big put_signal", Timeout: 10 * time.Second}
	if err := ns[0].Post(ps); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 1<<20)
	get := transport.RemoteOp{Kind: transport.RemoteGet, Ref: transport.Ref{Peer: 1, Key: keys[0], Off: 4096}, Local: transport.AddrOf(back), N: 1 << 20,
		What: "get", Timeout: 10 * time.Second}
	if err := ns[0].Post(get); err != nil {
		t.Fatal(err)
	}
	if err := ns[0].Quiet(nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if string(back) != string(mem[0][half:half+1<<20]) {
		t.Fatal("the get overtook the put_signal before it")
	}
	if err := ns[0].Flush(nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := slot(sig + 16); got != 9 {
		t.Fatalf("put_signal's signal = %d after the flush, want 9", got)
	}
	if err := ns[1].Quiet(nil, time.Second); err != nil {
		t.Fatalf("target: %v", err)
	}
}

// luacoll's TCP segment sizes apply where the environment is silent, and
// a value the user set is kept.
func TestTCPDefaultsKeepTheUsersValues(t *testing.T) {
	t.Setenv("UCX_TCP_TX_SEG_SIZE", "32k")
	old, had := os.LookupEnv("UCX_TCP_RX_SEG_SIZE")
	_ = os.Unsetenv("UCX_TCP_RX_SEG_SIZE")
	t.Cleanup(func() {
		if had {
			_ = os.Setenv("UCX_TCP_RX_SEG_SIZE", old)
		} else {
			_ = os.Unsetenv("UCX_TCP_RX_SEG_SIZE")
		}
	})
	setTCPDefaults()
	if v := os.Getenv("UCX_TCP_TX_SEG_SIZE"); v != "32k" {
		t.Fatalf("the user's UCX_TCP_TX_SEG_SIZE became %q", v)
	}
	if v := os.Getenv("UCX_TCP_RX_SEG_SIZE"); v != "256k" {
		t.Fatalf("UCX_TCP_RX_SEG_SIZE = %q, want luacoll's 256k", v)
	}
}

// With lanes, a put of at least stripeMin bytes goes in stripes over the
// lanes' workers; its data lands whole, after a message with data sent
// before it, and a put_signal's signal only after all of it.
func TestStripedPutsOverLanes(t *testing.T) {
	setLanes(t, "3")
	const size = 8 << 20
	ns, keys, mem := pairN(t, 2*size)
	for i := range ns {
		if got := len(keys[i].(*key).lanes); got != 3 {
			t.Fatalf("rank %d's key has %d lanes, want 3", i, got)
		}
	}
	const sig = 2*size - 64
	slot := func() uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[1][sig]))) }
	for round, n := range []uint64{stripeMin, size - 4096 - 5, 3*4096*86 + 1} { // the last: one byte past 3 whole pages a lane
		for i := range size {
			mem[0][size+i] = byte(i*5 + round*11 + i>>13)
		}
		// A message with data into the same bytes just before: the
		// stripes land after it.
		for i := range 4096 {
			mem[0][i] = 0xee
		}
		small := transport.RemoteOp{Kind: transport.RemotePut, Ref: transport.Ref{Peer: 1, Key: keys[0], Off: 4096}, Local: transport.AddrOf(mem[0][:4096]),
			N: 4096, What: "small put", Timeout: 10 * time.Second}
		if err := ns[0].Post(small); err != nil {
			t.Fatal(err)
		}
		op := transport.RemoteOp{Kind: transport.RemotePutSignal, Ref: transport.Ref{Peer: 1, Key: keys[0], Off: 4096}, Local: transport.AddrOf(mem[0][size:]),
			N: n, SigOff: sig, SigAdd: true, Value: 1, What: "striped put_signal", Timeout: 10 * time.Second}
		if err := ns[0].Post(op); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for slot() != uint64(round+1) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: signal %d", round, slot())
			}
			ns[0].Progress()
		}
		if string(mem[1][4096:4096+n]) != string(mem[0][size:size+int(n)]) {
			t.Fatalf("round %d: %d bytes: the data differs once the signal came", round, n)
		}
	}
	// A plain put in stripes, then a flush.
	put := transport.RemoteOp{Kind: transport.RemotePut, Ref: transport.Ref{Peer: 0, Key: keys[1]}, Local: transport.AddrOf(mem[1][4096:]),
		N: 3 << 20, What: "striped put", Timeout: 10 * time.Second}
	if err := ns[1].Post(put); err != nil {
		t.Fatal(err)
	}
	if err := ns[1].Flush(nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if string(mem[0][:3<<20]) != string(mem[1][4096:4096+3<<20]) {
		t.Fatal("the striped put's data differs after the flush")
	}
}

// The workers' addresses go in one blob; damaged blobs are refused.
func TestAddressesRoundTrip(t *testing.T) {
	l := []*lane{{addr: []byte("lane-one")}, {addr: []byte("2")}}
	got, err := decodeAddresses(encodeAddresses([]byte("main"), l))
	if err != nil || len(got) != 3 || string(got[0]) != "main" || string(got[1]) != "lane-one" || string(got[2]) != "2" {
		t.Fatalf("got %q, %v", got, err)
	}
	b := encodeAddresses([]byte("main"), l)
	for _, bad := range [][]byte{nil, b[:3], b[:len(b)-1], append(b, 0), binary.LittleEndian.AppendUint32(nil, 0)} {
		if _, err := decodeAddresses(bad); err == nil {
			t.Errorf("% x was accepted", bad)
		}
	}
}

// A striped put whose target stops driving its lanes fails after twice
// the timeout (at least a second) with the lanes to that peer closed, its
// stripes cancelled rather than left reading the source; later striped
// puts to the peer fail at once, while the rank's own worker still works.
func TestStripedPutTimesOutAndCutsTheLanes(t *testing.T) {
	setLanes(t, "2")
	ns, keys, mem := pairN(t, 4<<20)
	put := transport.RemoteOp{Kind: transport.RemotePut, Ref: transport.Ref{Peer: 1, Key: keys[0]}, Local: transport.AddrOf(mem[0][1<<20:]),
		N: 2 << 20, What: "striped put", Timeout: 100 * time.Millisecond}
	// One striped put first: every lane's connection is wired up (UCX
	// 1.13 asserts when a connection fails with its wire-up unfinished).
	if err := ns[0].Post(put); err != nil {
		t.Fatal(err)
	}
	// The target's lanes stall: their goroutines wait for the lock.
	for _, l := range ns[1].lanes {
		l.mu.Lock()
	}
	stalled := true
	release := func() {
		if stalled {
			for _, l := range ns[1].lanes {
				l.mu.Unlock()
			}
			stalled = false
		}
	}
	defer release()
	start := time.Now()
	err := ns[0].Post(put)
	if err == nil || !strings.Contains(err.Error(), "lanes are closed") {
		t.Fatalf("got %v, want the stripes' timeout", err)
	}
	if d := time.Since(start); d < 2*time.Second || d > 10*time.Second {
		t.Errorf("the timeout came after %v, want about 2 s", d)
	}
	start = time.Now()
	if err := ns[0].Post(put); err == nil || time.Since(start) > time.Second {
		t.Fatalf("a later striped put: %v after %v, want an error at once", err, time.Since(start))
	}
	small := put
	small.N, small.What = 4096, "small put"
	for i := range 4096 {
		mem[0][1<<20+i] = byte(i + 1)
	}
	if err := ns[0].Post(small); err != nil {
		t.Fatal(err)
	}
	if err := ns[0].Flush(nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if string(mem[1][:4096]) != string(mem[0][1<<20:1<<20+4096]) {
		t.Fatal("a small put after the cut lanes did not land")
	}
	// The target's lanes go on (and see their endpoints fail) before the
	// transports close.
	release()
	time.Sleep(50 * time.Millisecond)
}

// setLanes sets knobs.NetLanes for the test's transports.
func setLanes(t *testing.T, n string) {
	t.Cleanup(func() { knobs.Reload() }) // after t.Setenv's own
	t.Setenv(knobs.NetLanes.Name, n)
	if err := knobs.Reload().Err(); err != nil {
		t.Fatal(err)
	}
}
