package plan

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// List is one rank's recorded plan as every rank learns it when the plan
// is made: the window it was recorded on, the shape of that window and of
// the plan's buffers, the counts the schedule already believed its slots
// held when recording began (Base), and the ops.
type List struct {
	Window int
	Shape  Shape
	// Base[row] is how many signal (or counter) units the recording code
	// already counted on this rank's inbox row (or counter) when recording
	// began: the sum of what earlier plans of the window added to it in
	// their recordings. Rows are numbered by Shape.SigRow and
	// Shape.CtrRow. The verifier starts the rows there.
	Base []uint64
	// Sent[Shape.SigRow(r, g)] is what this rank's code added to slot g of
	// its row in rank r's inbox outside plans (eagerly) before recording
	// began, and Sent[Shape.CtrRow(p, c)] what it added to its own counter
	// c for p since that counter's last reset: counts the recording code
	// also saw. The verifier starts every row there, on top of Base (replays
	// need no such start: the slots hold what was sent).
	Sent []uint64
	// Inbox, when set, is what this rank's inbox rows (Shape.SigRow) held
	// when the plan was made, read after a sync, and Replayed the window
	// ledger's Replayed rows of this rank then. A rank that reset its
	// inbox (w:reset_signals) sends them: the senders' Sent still counts
	// what the reset wiped. The verifier starts the rows into this rank
	// at Inbox + Base - Replayed, the distance the replays' waits will see.
	Inbox, Replayed []uint64
	Ops             []Op
}

// Rows is the number of ledger rows of a shape: one per (sender, signal)
// of a rank's inbox, then one per (peer, counter).
func (s Shape) Rows() int { return s.Ranks*s.Signals + s.Ranks*s.Counters }

// SigRow is the row of sender's slot sig in a rank's inbox.
func (s Shape) SigRow(sender, sig int) int { return sender*s.Signals + sig }

// CtrRow is the row of the local counter ctr kept for peer.
func (s Shape) CtrRow(peer, ctr int) int { return s.Ranks*s.Signals + peer*s.Counters + ctr }

const listMagic = 0x50 // 'P', version 0

// Limits on a plan's size: every rank holds every rank's list (a few
// hundred bytes an op, with what a replay derives from it), so a plan of
// millions of ops would take gigabytes on each rank and seconds to make.
// Recording refuses the op past MaxOps on a rank; a plan whose ranks
// recorded more than MaxTotalOps together is refused on every rank.
const (
	MaxOps      = 1 << 20
	MaxTotalOps = 1 << 21
)

// CheckTotal refuses lists of more than limit ops together (MaxTotalOps
// but in tests).
func CheckTotal(lists []List, limit int) error {
	total := 0
	for _, l := range lists {
		total += len(l.Ops)
	}
	if total > limit {
		return fmt.Errorf("the ranks recorded %d ops together, more than a plan may hold (%d over all ranks): split the schedule into smaller plans", total, limit)
	}
	return nil
}

// maxDecode bounds what a decoded list may claim, so that a corrupt
// message cannot make the decoder allocate without limit.
const maxDecode = 1 << 24

// Encode serialises the list for the collective that makes a plan, or,
// when status is not "", only that: the rank's reason for having no list.
func (l List) Encode(status string) []byte {
	b := []byte{listMagic}
	b = appendString(b, status)
	if status != "" {
		return b
	}
	b = binary.AppendVarint(b, int64(l.Window))
	s := l.Shape
	for _, v := range []int{s.Ranks, s.Signals, s.Counters, s.Barriers} {
		b = binary.AppendVarint(b, int64(v))
	}
	b = binary.AppendUvarint(b, s.Bytes)
	b = binary.AppendUvarint(b, uint64(len(s.Buffers)))
	for _, v := range s.Buffers {
		b = binary.AppendUvarint(b, v)
	}
	b = appendSparse(b, l.Base)
	b = appendSparse(b, l.Sent)
	if l.Inbox != nil {
		b = append(b, 1)
		b = appendSparse(b, l.Inbox)
		b = appendSparse(b, l.Replayed)
	} else {
		b = append(b, 0)
	}
	files := map[string]int{}
	var names []string
	for _, o := range l.Ops {
		if _, ok := files[o.Site.File]; !ok {
			files[o.Site.File] = len(names)
			names = append(names, o.Site.File)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = appendString(b, n)
	}
	b = binary.AppendUvarint(b, uint64(len(l.Ops)))
	for _, o := range l.Ops {
		b = append(b, byte(o.Kind), byte(o.SigOp), byte(o.Cmp), byte(o.FillKind))
		for _, v := range []int{o.Peer, o.Buf, o.Sig, o.Ctr, o.Bar, files[o.Site.File], o.Site.Line} {
			b = binary.AppendVarint(b, int64(v))
		}
		for _, v := range []uint64{o.Off, o.BufOff, o.N, o.SigValue, o.CtrValue, o.Value, o.FillArg} {
			b = binary.AppendUvarint(b, v)
		}
		b = o.appendReduce(b)
	}
	return b
}

// appendSparse writes the non-zero entries of v as (index, value) pairs.
func appendSparse(b []byte, v []uint64) []byte {
	nz := 0
	for _, x := range v {
		if x != 0 {
			nz++
		}
	}
	b = binary.AppendUvarint(b, uint64(nz))
	for i, x := range v {
		if x != 0 {
			b = binary.AppendUvarint(b, uint64(i))
			b = binary.AppendUvarint(b, x)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated plan message")

// sparse reads what appendSparse wrote, into rows entries.
func (d *decoder) sparse(what string, rows int) []uint64 {
	nz := d.count(what + " rows")
	if d.err != nil {
		return nil
	}
	v := make([]uint64, rows)
	for i := 0; i < nz && d.err == nil; i++ {
		row, x := d.uvarint(), d.uvarint()
		if d.err == nil && row >= uint64(len(v)) {
			d.err = fmt.Errorf("plan message: %s row %d outside 0..%d", what, row, len(v)-1)
		}
		if d.err == nil {
			v[row] = x
		}
	}
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	if v < -maxDecode || v > 1<<40 {
		d.err = fmt.Errorf("plan message: value %d out of range", v)
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *decoder) count(what string) int {
	v := d.uvarint()
	if d.err == nil && v > maxDecode {
		d.err = fmt.Errorf("plan message: %d %s is too many", v, what)
	}
	return int(v)
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) string() string {
	n := d.count("bytes")
	if d.err != nil {
		return ""
	}
	if n > len(d.b) {
		d.err = errShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// DecodeHead reads only the window and status of a message Encode wrote:
// enough for a rank that keeps no one else's ops (luacoll check's ranks
// other than 0, which replay nothing).
func DecodeHead(p []byte) (window int, status string, err error) {
	if len(p) == 0 || p[0] != listMagic {
		return 0, "", errors.New("not a plan message")
	}
	d := &decoder{b: p[1:]}
	status = d.string()
	if d.err == nil && status == "" {
		window = d.int()
	}
	return window, status, d.err
}

// DecodeList is the inverse of Encode: it returns the list and the
// rank's status (with an empty list when the status is not ""). Every count and index is checked; nothing in a message
// makes it panic.
func DecodeList(p []byte) (List, string, error) { return decodeList(p, maxDecode) }

// decodeList is DecodeList with the most rows (signal and counter rows
// over all ranks) a list may claim: each of its four row arrays is
// allocated whole, whatever the message's length.
func decodeList(p []byte, maxRows int) (List, string, error) {
	var l List
	if len(p) == 0 || p[0] != listMagic {
		return l, "", errors.New("not a plan message")
	}
	d := &decoder{b: p[1:]}
	status := d.string()
	if d.err == nil && status != "" {
		if len(d.b) != 0 {
			return List{}, "", fmt.Errorf("plan message: %d bytes after a failure", len(d.b))
		}
		return List{}, status, nil
	}
	l.Window = d.int()
	s := &l.Shape
	s.Ranks, s.Signals, s.Counters, s.Barriers = d.int(), d.int(), d.int(), d.int()
	s.Bytes = d.uvarint()
	nb := d.count("buffers")
	for i := 0; i < nb && d.err == nil; i++ {
		s.Buffers = append(s.Buffers, d.uvarint())
	}
	if d.err == nil && (s.Ranks < 1 || s.Signals < 0 || s.Counters < 0 || s.Barriers < 0 || s.Ranks > 1<<16 ||
		s.Signals > window.MaxSlots || s.Counters > window.MaxSlots || s.Barriers > window.MaxSlots) {
		d.err = fmt.Errorf("plan message: bad shape %+v", *s)
	}
	if d.err == nil && s.Rows() > maxRows {
		d.err = fmt.Errorf("plan message: %d rows is too many", s.Rows())
	}
	l.Base = d.sparse("base", s.Rows())
	l.Sent = d.sparse("sent", s.Rows())
	switch d.byte() {
	case 0:
	case 1:
		l.Inbox = d.sparse("inbox", s.Rows())
		l.Replayed = d.sparse("replayed", s.Rows())
	default:
		if d.err == nil {
			d.err = errors.New("plan message: bad inbox flag")
		}
	}
	nf := d.count("files")
	var files []string
	for i := 0; i < nf && d.err == nil; i++ {
		files = append(files, d.string())
	}
	no := d.count("ops")
	for i := 0; i < no && d.err == nil; i++ {
		var o Op
		o.Kind = Kind(d.byte())
		o.SigOp = window.SignalOp(d.byte())
		o.Cmp = transport.Cmp(d.byte())
		o.FillKind = transport.FillKind(d.byte())
		var file int
		o.Peer, o.Buf, o.Sig, o.Ctr, o.Bar, file, o.Site.Line = d.int(), d.int(), d.int(), d.int(), d.int(), d.int(), d.int()
		o.Off, o.BufOff, o.N, o.SigValue, o.CtrValue, o.Value, o.FillArg = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
		d.reduce(&o)
		if d.err != nil {
			break
		}
		if o.Kind >= numKinds || o.SigOp > window.SigSet || o.Cmp > transport.CmpGe || o.FillKind > transport.FillRandU32 {
			d.err = fmt.Errorf("plan message: op %d has an unknown kind, signal op, comparison or fill", i+1)
			break
		}
		if file < 0 || file >= len(files) {
			d.err = fmt.Errorf("plan message: op %d names file %d of %d", i+1, file, len(files))
			break
		}
		o.Site.File = files[file]
		l.Ops = append(l.Ops, o)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("plan message: %d bytes left over", len(d.b))
	}
	if d.err != nil {
		return List{}, "", d.err
	}
	return l, status, nil
}
