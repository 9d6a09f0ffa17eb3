package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Wire protocol. Every frame is a 4-byte big-endian length (of what
// follows), a type byte and a body. The hub opens every connection with a
// challenge (a nonce); the client's first frame is hello, which proves
// with an HMAC keyed by the job's secret that it knows the secret; the hub
// answers accept (proving the same back) and welcome once every rank said
// hello, or reject.
const (
	bootVersion      = 3
	maxBootFrame     = 256 << 20 // largest frame (type byte and body)
	maxHelloFrame    = 64 << 10  // largest frame before a client is known
	defaultBootLimit = 30 * time.Second
	statusWait       = 250 * time.Millisecond // how long a timed-out call asks the hub who is missing
	failAckWait      = 2 * time.Second        // how long Fail waits for the hub to pass the news on
	drainWait        = time.Second            // how long the hub flushes its last frames when it stops
	maxListedRanks   = 16
	maxHostLen       = 1024 // longer host identities are cut
)

type frameType byte

const (
	frHello       frameType = iota + 1 // version u8, rank u32, size u32, host
	frWelcome                          // job bytes, n u32, n × host bytes
	frReject                           // message
	frColl                             // kind u8, flags u8, seq u64, root u32, data
	frResult                           // seq u64, kind u8, payload
	frCollErr                          // seq u64, message
	frSend                             // to u32, tag u32, data
	frDeliver                          // from u32, tag u32, data
	frFail                             // reason
	frFailAck                          //
	frAbort                            // rank u32, died u8, reason
	frBye                              // first seq this rank will not join u64, why it left early (rest)
	frByeAck                           //
	frStatus                           // seq u64
	frStatusReply                      // seq u64, known u8, n u32, n × rank u32
	frClock                            // id u64
	frClockReply                       // id u64, job clock ns u64
	frChallenge                        // hub nonce
	frAccept                           // mac (acceptMAC)
	frEnded                            // id u64
	frEndedReply                       // id u64, n u32, n × (rank u32, why bytes)
	frEndedNotice                      // rank u32, why bytes: that rank has ended
)

// collKind is the kind of a collective call.
type collKind byte

const (
	collAllGather collKind = iota + 1
	collBroadcast
	collBarrier
)

func (k collKind) String() string {
	switch k {
	case collAllGather:
		return "allgather"
	case collBroadcast:
		return "broadcast"
	case collBarrier:
		return "barrier"
	}
	return fmt.Sprintf("collective(%d)", byte(k))
}

// collOversize marks a contribution too large to send: the collective then
// fails on every rank.
const collOversize = 1

// collAtEnd marks a rank's contribution made once its script has ended
// (the meeting before windows are torn down, AtScriptEnd): a call of the
// others' that meets it is theirs alone, and the rank ended before it.
const collAtEnd = 2

// frameBuilder encodes one frame.
type frameBuilder struct{ b []byte }

func newFrame(t frameType, hint int) *frameBuilder {
	b := make([]byte, 4, 5+max(hint, 0))
	return &frameBuilder{b: append(b, byte(t))}
}

func (f *frameBuilder) u8(v byte)    { f.b = append(f.b, v) }
func (f *frameBuilder) u32(v uint32) { f.b = binary.BigEndian.AppendUint32(f.b, v) }
func (f *frameBuilder) u64(v uint64) { f.b = binary.BigEndian.AppendUint64(f.b, v) }
func (f *frameBuilder) raw(p []byte) { f.b = append(f.b, p...) }

// bytes appends a length-prefixed byte string.
func (f *frameBuilder) bytes(p []byte) {
	f.u32(uint32(min(len(p), maxBootFrame+1)))
	f.b = append(f.b, p...)
}

// runs appends vals as runs of equal neighbours: the number of runs,
// then per run its length and its value (length-prefixed). What every
// rank sends alike (a call's check, an empty status) then costs one run
// however many ranks there are, and the hosts of a welcome one run per
// host; the hub sends the frame to every rank, so this keeps what one
// collective writes from growing with the square of the ranks.
func (f *frameBuilder) runs(vals [][]byte) {
	var count []int
	for i := 0; i < len(vals); {
		j := i + 1
		for j < len(vals) && string(vals[j]) == string(vals[i]) {
			j++
		}
		count = append(count, j-i)
		i = j
	}
	f.u32(uint32(len(count)))
	i := 0
	for _, c := range count {
		f.u32(uint32(c))
		f.bytes(vals[i])
		i += c
	}
}

// runs reads n values written by frameBuilder.runs; the values of one
// run share their bytes (callers only read them).
func (r *frameReader) runs(n int) [][]byte {
	k := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(k) > uint64(n) || (n > 0 && k == 0) {
		r.err = fmt.Errorf("%d runs for %d values", k, n)
		return nil
	}
	out := make([][]byte, 0, n)
	for range k {
		c := r.u32()
		v := r.bytes()
		if r.err != nil {
			return nil
		}
		if c == 0 || uint64(c) > uint64(n-len(out)) {
			r.err = fmt.Errorf("a run of %d values where %d are left", c, n-len(out))
			return nil
		}
		for range c {
			out = append(out, v)
		}
	}
	if len(out) != n {
		r.err = fmt.Errorf("runs of %d values, want %d", len(out), n)
		return nil
	}
	return out
}

// finish fills in the length; frames over the limit are an error.
func (f *frameBuilder) finish() ([]byte, error) {
	n := len(f.b) - 4
	if n > maxBootFrame {
		return nil, fmt.Errorf("frame of %d bytes exceeds the %d MiB bootstrap limit", n, maxBootFrame>>20)
	}
	binary.BigEndian.PutUint32(f.b, uint32(n))
	return f.b, nil
}

// readFrame reads one frame of at most limit bytes (type byte included).
func readFrame(r io.Reader, limit int) (frameType, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 1 || uint64(n) > uint64(limit) {
		return 0, nil, fmt.Errorf("frame length %d out of range 1..%d", n, limit)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return frameType(buf[0]), buf[1:], nil
}

// frameReader decodes a frame body; the first short read sets err and
// makes every later read return zero.
type frameReader struct {
	b   []byte
	err error
}

func (r *frameReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *frameReader) u8() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *frameReader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *frameReader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// bytes reads a length-prefixed byte string.
func (r *frameReader) bytes() []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	return r.take(int(n))
}

// rest returns what is left of the body.
func (r *frameReader) rest() []byte {
	if r.err != nil {
		return nil
	}
	p := r.b
	r.b = nil
	return p
}
