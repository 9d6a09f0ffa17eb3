package cost

import (
	"fmt"
	"math"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// The memory past the cache. On the host backend a put or copy is a
// processor's memmove, and calibrate measures it two ranks at a time, with
// what the two move fitting the processors' last-level cache at the
// smaller sizes. Where the bytes the ranks of a host touch in a replay (the
// window ranges written into each rank, the buffer ranges read) outgrow
// the cache, more of their copies run at the memory's speed, and the ranks
// of the host that copy at once (no more than its CPUs) share its
// bandwidth: a byte costs BetaNs x those ranks / Memory.Ranks there
// (BetaNs measured with Memory.Ranks ranks moving at once past the cache).
// Only ranks of the machine the estimate runs on have a known memory (see
// memoryBound). A put or copy of n bytes takes its line's time
// plus the part of the bytes that the cache does not hold times what the
// memory's cost adds to the line's. The cache holds half of what it could
// (lines a rank reads and writes both take room, as do the processors'
// other data): the part of a replay's t bytes that does not fit is 1 -
// CacheBytes/2/t.

// Memory is the host processors' last-level cache and the cost of a byte
// moved past it: the self class's, host backend, where measured.
type Memory struct {
	// CacheBytes is the last-level cache of the machine's processors.
	CacheBytes uint64 `json:"cache_bytes"`
	// Ranks is how many ranks moved bytes at once as BetaNs was measured.
	Ranks int `json:"ranks"`
	// BetaNs is what a byte of a put costs a rank then.
	BetaNs float64 `json:"beta_ns_per_byte"`
}

func (m *Memory) check() error {
	if m.CacheBytes == 0 || m.Ranks < 1 || m.BetaNs < 0 || math.IsNaN(m.BetaNs) || math.IsInf(m.BetaNs, 0) {
		return fmt.Errorf("cache of %d bytes, %d ranks, %v ns a byte: want a cache, 1 rank or more and a finite cost of 0 or more", m.CacheBytes, m.Ranks, m.BetaNs)
	}
	return nil
}

// MemoryOf is the Memory a calibration implies: put (the puts between two
// ranks at once, by size) measured past twice the cache of cache bytes, at
// its largest size's time a byte; nil when it was not (or no cache is
// known).
func MemoryOf(put Cost, cache uint64, ranks int) *Memory {
	k := len(put.Sizes)
	if cache == 0 || k == 0 || put.Sizes[k-1] < 2*cache {
		return nil
	}
	return &Memory{CacheBytes: cache, Ranks: ranks, BetaNs: put.TimesNs[k-1] / float64(put.Sizes[k-1])}
}

// memShare is the memory's part of a rank's copies: for frac of their
// bytes, a byte costs ns where the line says less.
type memShare struct{ ns, frac float64 }

// memoryBound returns, for each rank, the memory's part of its puts and
// copies (nil: none): set for the ranks of a host whose replay touches
// more bytes than half of mem's cache. The ranks that share the memory's
// bandwidth are those of the host that copy at once: no more than its cpus,
// where ranks take turns on them. It applies to ranks of the machine the
// estimate runs on (cpus known); the hosts of a layout or of simulated
// ranks are hypothetical (a CPU each: cpus 0), and so is their memory.
func memoryBound(lists []plan.List, class func(from, to int) transport.PeerKind, mem *Memory, cpus int) []memShare {
	if mem == nil || cpus <= 0 || len(lists) == 0 {
		return nil
	}
	host := hostsOf(len(lists), class)
	touched := make([]uint64, len(lists)) // by host's lowest rank
	ranks := make([]int, len(lists))
	for r, n := range footprints(lists) {
		ranks[host[r]]++
		touched[host[r]] += n
	}
	out := make([]memShare, len(lists))
	any := false
	for r := range lists {
		h := host[r]
		if held := float64(mem.CacheBytes) / 2; float64(touched[h]) > held {
			busy := min(ranks[h], cpus)
			out[r] = memShare{ns: mem.BetaNs * float64(busy) / float64(mem.Ranks), frac: 1 - held/float64(touched[h])}
			any = true
		}
	}
	if !any {
		return nil
	}
	return out
}

// footprints are the bytes each rank's replay touches: the ranges of its
// window that puts (its own and its peers') write, and the ranges of its
// buffers its puts read.
func footprints(lists []plan.List) []uint64 {
	window := make([]spans, len(lists))
	bufs := make([]map[int]*spans, len(lists))
	for q, l := range lists {
		bufs[q] = map[int]*spans{}
		for _, o := range l.Ops {
			if !o.Kind.IsPut() || o.Peer < 0 || o.Peer >= len(lists) {
				continue
			}
			window[o.Peer].set(o.Off, o.Off+o.N, true)
			if o.Buf == plan.WindowBuf {
				continue
			}
			b := bufs[q][o.Buf]
			if b == nil {
				b = &spans{}
				bufs[q][o.Buf] = b
			}
			b.set(o.BufOff, o.BufOff+o.N, true)
		}
	}
	out := make([]uint64, len(lists))
	for r := range out {
		out[r] = window[r].bytes()
		for _, b := range bufs[r] {
			out[r] += b.bytes()
		}
	}
	return out
}

// bytes is how many bytes the spans cover.
func (ss spans) bytes() uint64 {
	var n uint64
	for _, x := range ss {
		n += x.hi - x.lo
	}
	return n
}

// hostsOf returns each rank's host as its lowest rank: the ranks a rank
// reaches without the network.
func hostsOf(ranks int, class func(from, to int) transport.PeerKind) []int {
	host := make([]int, ranks)
	for r := range host {
		host[r] = r
		for q := 0; q < r; q++ {
			if class(r, q) != transport.KindNet {
				host[r] = host[q]
				break
			}
		}
	}
	return host
}

// pastCache is the link time l of rank r's put or copy of n bytes, with
// the memory's part where its host's replay outgrows the cache.
func (s *sim) pastCache(r int, n uint64, l float64) float64 {
	if s.mem == nil {
		return l
	}
	f := s.mem[r]
	return l + max(0, float64(n)*f.ns-l)*f.frac
}
