package window

// layout places the parts of a window in one rank's region. Every row that
// one sender writes starts on its own 128-byte line, so two senders never
// share a cache line (nor the adjacent line a prefetcher pairs with it).
type layout struct {
	Size     int // ranks
	Bytes    uint64
	Signals  int
	Counters int
	Barriers int

	DataOff     uint64
	InboxOff    uint64 // [sender][signal] uint64
	InboxStride uint64
	BarOff      uint64 // [sender][barrier id] uint64, window barriers
	PBarOff     uint64 // [sender][barrier id] uint64, pairwise barriers
	BarStride   uint64
	CtrOff      uint64 // [peer][counter] uint64, local completion
	CtrStride   uint64
	BellOff     uint64 // the owner's bell (transport.BellBytes): host waits sleep on it
	Total       uint64
}

const line = 128

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// newLayout computes the layout of a window.
func newLayout(size int, bytes uint64, signals, counters, barriers int) layout {
	l := layout{Size: size, Bytes: bytes, Signals: signals, Counters: counters, Barriers: barriers}
	n := uint64(size)
	l.InboxOff = roundUp(bytes, line)
	l.InboxStride = roundUp(uint64(signals)*8, line)
	l.BarOff = l.InboxOff + n*l.InboxStride
	l.BarStride = roundUp(uint64(barriers)*8, line)
	l.PBarOff = l.BarOff + n*l.BarStride
	l.CtrOff = l.PBarOff + n*l.BarStride
	l.CtrStride = roundUp(uint64(counters)*8, line)
	l.BellOff = l.CtrOff + n*l.CtrStride
	l.Total = l.BellOff + line
	return l
}

// Inbox is the offset of the slot sig that sender writes.
func (l layout) Inbox(sender, sig int) uint64 {
	return l.InboxOff + uint64(sender)*l.InboxStride + uint64(sig)*8
}

// Bar is the offset of window-barrier slot id that sender writes.
func (l layout) Bar(sender, id int) uint64 {
	return l.BarOff + uint64(sender)*l.BarStride + uint64(id)*8
}

// PBar is the offset of pairwise-barrier slot id that sender writes.
func (l layout) PBar(sender, id int) uint64 {
	return l.PBarOff + uint64(sender)*l.BarStride + uint64(id)*8
}

// Ctr is the offset of local counter ctr kept for peer.
func (l layout) Ctr(peer, ctr int) uint64 {
	return l.CtrOff + uint64(peer)*l.CtrStride + uint64(ctr)*8
}
