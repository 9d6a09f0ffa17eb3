package plan

import (
	"reflect"
	"testing"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

func sampleList() List {
	l := ringLists(4, 1000)[2]
	l.Window = 3
	l.Base = make([]uint64, l.Shape.Rows())
	l.Base[l.Shape.SigRow(1, 0)] = 7
	l.Base[l.Shape.CtrRow(3, 2)] = 1 << 50
	l.Sent = make([]uint64, l.Shape.Rows())
	l.Sent[l.Shape.SigRow(2, 1)] = 5
	l.Sent[l.Shape.CtrRow(0, 0)] = 3
	l.Inbox = make([]uint64, l.Shape.Rows())
	l.Inbox[l.Shape.SigRow(3, 7)] = 11
	l.Replayed = make([]uint64, l.Shape.Rows())
	l.Replayed[l.Shape.SigRow(0, 1)] = 4
	l.Ops = append(l.Ops,
		Op{Kind: Fill, Buf: 1, FillKind: transport.FillRandU32, FillArg: 99, Site: Site{File: "other.lua", Line: 3}},
		Op{Kind: PutSignalCounter, Peer: 3, Off: 5, Buf: 1, BufOff: 6, N: 7, Sig: 1, SigValue: 2, SigOp: window.SigSet, Ctr: 2, CtrValue: 4, Site: Site{File: "other.lua", Line: 4}},
		Op{Kind: WaitCounter, Peer: 3, Ctr: 2, Cmp: transport.CmpEq, Value: 1<<53 - 1, Site: Site{Line: -1}},
		Op{Kind: BarrierPeer, Peer: 1, Bar: 3})
	return l
}

func TestListRoundTrip(t *testing.T) {
	l := sampleList()
	got, status, err := DecodeList(l.Encode("boom"))
	if err != nil || status != "boom" || len(got.Ops) != 0 {
		t.Fatalf("%v %q %v", err, status, got)
	}
	got, status, err = DecodeList(l.Encode(""))
	if err != nil || status != "" {
		t.Fatalf("%v %q", err, status)
	}
	if !reflect.DeepEqual(got, l) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, l)
	}
	// Every truncation fails cleanly.
	b := l.Encode("")
	for i := 0; i < len(b); i++ {
		if _, _, err := DecodeList(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
	if _, _, err := DecodeList(append(b, 0)); err == nil {
		t.Fatal("trailing byte: no error")
	}
}

func TestOpString(t *testing.T) {
	l := sampleList()
	for i, want := range map[int]string{
		0:  "barrier id=0 @ag.lua:10",
		1:  "put peer=2 off=2000 src=b1 src_off=0 n=1000 @ag.lua:11",
		3:  "put_signal peer=3 off=2000 src=w src_off=2000 n=1000 sig=0 value=1 sigop=add @ag.lua:13",
		4:  "wait_signal_from peer=1 sig=0 cmp=>= value=1 @ag.lua:14",
		9:  "fill buf=b1 kind=rand arg=99 @other.lua:3",
		10: "put_signal_counter peer=3 off=5 src=b1 src_off=6 n=7 sig=1 value=2 sigop=set ctr=2 cvalue=4 @other.lua:4",
		11: "wait_counter peer=3 ctr=2 cmp=== value=9007199254740991 @?",
		12: "barrier_peer peer=1 id=3 @?",
	} {
		if got := l.Ops[i].String(); got != want {
			t.Errorf("op %d: %q, want %q", i, got, want)
		}
	}
	for k := Kind(0); k < numKinds; k++ {
		if p, ok := ParseKind(k.String()); !ok || p != k {
			t.Errorf("ParseKind(%q)", k)
		}
	}
}

func TestDeltasAndLedger(t *testing.T) {
	l := directLists(4, 8)
	sh := l[1].Shape
	d := Deltas(l)[1]
	for r := 0; r < 4; r++ {
		want := uint64(1)
		if r == 1 {
			want = 0
		}
		if d.Delta[sh.SigRow(r, 0)] != want || d.Set[sh.SigRow(r, 0)] || d.Reset[sh.SigRow(r, 0)] {
			t.Fatalf("row from %d: %d", r, d.Delta[sh.SigRow(r, 0)])
		}
	}
	var led Ledger
	l2 := directLists(4, 8)
	led.Record(l, 1)
	led.Record(l2, 1)
	if l[0].Base[sh.SigRow(1, 0)] != 0 || l2[0].Base[sh.SigRow(1, 0)] != 1 || led.Recorded[3][sh.SigRow(2, 0)] != 2 || len(led.Replayed) != sh.Rows() {
		t.Fatalf("ledger %v %v %v", l[0].Base, l2[0].Base, led.Recorded[3])
	}
	// counters: put_counter adds, a reset in the list zeroes the delta
	l[0].Ops = append(l[0].Ops, Op{Kind: PutCounter, Peer: 2, Ctr: 1, CtrValue: 3, N: 1, Buf: 1}, Op{Kind: PutCounter, Peer: 3, Ctr: 0, CtrValue: 1, N: 1, Buf: 1}, Op{Kind: ResetCounter, Peer: 3, Ctr: 0})
	l[3].Ops = append(l[3].Ops, Op{Kind: SignalAll, Sig: 2, SigValue: 5})
	d = Deltas(l)[0]
	if d.Delta[sh.CtrRow(2, 1)] != 3 || d.Delta[sh.CtrRow(3, 0)] != 0 || !d.Reset[sh.CtrRow(3, 0)] || d.Delta[sh.SigRow(3, 2)] != 5 {
		t.Fatalf("deltas %v", d.Delta)
	}
}

// FuzzDecodeList: no message makes DecodeList panic, and what it accepts
// encodes back to a message it decodes to the same list.
func FuzzDecodeList(f *testing.F) {
	f.Add(sampleList().Encode("status"))
	f.Add(List{Shape: Shape{Ranks: 1, Buffers: []uint64{0}}}.Encode(""))
	f.Add([]byte{listMagic})
	// At most 2^16 rows (DecodeList takes 2^24): a list that claims the
	// most makes four arrays of 128 MiB, and the fuzzer, once it found one,
	// spent a minute of a CI run mutating it.
	f.Fuzz(func(t *testing.T, b []byte) {
		l, status, err := decodeList(b, 1<<16)
		if err != nil {
			return
		}
		again, s2, err := decodeList(l.Encode(status), 1<<16)
		if err != nil || s2 != status || !reflect.DeepEqual(again, l) {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}
