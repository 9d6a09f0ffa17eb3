package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/window"
)

func reduceList() List {
	l := List{Window: 1, Shape: Shape{Ranks: 2, Bytes: 4096, Signals: 4, Counters: 1, Barriers: 1, Buffers: []uint64{4096, 1024}}}
	l.Base = make([]uint64, l.Shape.Rows())
	l.Sent = make([]uint64, l.Shape.Rows())
	l.Ops = []Op{
		{Kind: Reduce, Buf: 0, BufOff: 64, Src: 1, SrcOff: 128, N: 256, DType: kernels.BF16, RedOp: kernels.Max, Site: Site{File: "r.lua", Line: 3}},
		{Kind: ReduceFrom, Peer: 1, Off: 512, Buf: 1, BufOff: 8, N: 64, DType: kernels.U64, RedOp: kernels.Prod, Site: Site{File: "r.lua", Line: 4}},
	}
	return l
}

func TestReduceOpsRoundTrip(t *testing.T) {
	l := reduceList()
	b := l.Encode("")
	got, _, err := DecodeList(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, l) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, l)
	}
	for i := 0; i < len(b); i++ {
		if _, _, err := DecodeList(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
	// An unknown element type (the second-to-last byte) is refused.
	bad := append([]byte(nil), b...)
	bad[len(bad)-2] = 200
	if _, _, err := DecodeList(bad); err == nil || !strings.Contains(err.Error(), "unknown type") {
		t.Fatalf("bad type: %v", err)
	}
	want := []string{
		"reduce dst=w dst_off=64 src=b1 src_off=128 n=256 type=bf16 redop=max @r.lua:3",
		"reduce_from peer=1 src_off=512 dst=b1 dst_off=8 n=64 type=u64 redop=prod @r.lua:4",
	}
	for i, o := range got.Ops {
		if o.String() != want[i] {
			t.Errorf("op %d: %q, want %q", i, o.String(), want[i])
		}
	}
}

// TestReduceOpCheck: the shape check refuses what the window would,
// naming the argument.
func TestReduceOpCheck(t *testing.T) {
	s := reduceList().Shape
	ok := reduceList().Ops
	for i, o := range ok {
		if err := s.Check(0, o); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	cases := []struct {
		change func(*Op)
		arg    string
	}{
		{func(o *Op) { o.N = 255 }, "n"},
		{func(o *Op) { o.BufOff = 65 }, "dst_off"},
		{func(o *Op) { o.SrcOff = 127 }, "src_off"},
		{func(o *Op) { o.Src, o.SrcOff = 0, 128 }, "src"},
		{func(o *Op) { o.Src = 5 }, "src"},
		{func(o *Op) { o.SrcOff = 1000 }, "n"},
		{func(o *Op) { o.BufOff = 4000 }, "n"},
	}
	for i, c := range cases {
		o := ok[0]
		c.change(&o)
		var ae *window.ArgError
		if err := s.Check(0, o); !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("case %d: %v, want an error naming %q", i, err, c.arg)
		}
	}
	from := []struct {
		change func(*Op)
		arg    string
	}{
		{func(o *Op) { o.Peer = 2 }, "peer"},
		{func(o *Op) { o.Off = 4090 }, "n"},
		{func(o *Op) { o.Off = 4 }, "src_off"},
		{func(o *Op) { o.BufOff = 1020 }, "n"},
	}
	for i, c := range from {
		o := ok[1]
		c.change(&o)
		var ae *window.ArgError
		if err := s.Check(0, o); !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("reduce_from case %d: %v, want an error naming %q", i, err, c.arg)
		}
	}
}
