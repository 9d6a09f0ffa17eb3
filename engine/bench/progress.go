package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progressBar is the one-line progress display of a benchmark over a list
// of sizes: "\r[#####.....] 5/10 sizes, 12.3 s, measuring 16777216 bytes",
// redrawn in place, and again every progressTick while a size is measured
// so that the clock moves. A nil writer draws nothing.
type progressBar struct {
	w     io.Writer
	total int
	start time.Time
	tick  time.Duration

	mu     sync.Mutex
	done   int
	what   string
	shown  bool          // the line is on screen (not cleared or paused)
	stop   chan struct{} // closed by clear: the ticker ends
	ticker sync.Once
}

const (
	progressWidth = 24
	progressTick  = time.Second
)

func newProgressBar(w io.Writer, total int) *progressBar {
	return &progressBar{w: w, total: total, start: time.Now(), tick: progressTick, stop: make(chan struct{})}
}

// show redraws the bar with done of total steps finished and what is
// under way; the bar then redraws itself every tick until pause or clear.
func (p *progressBar) show(done int, what string) {
	if p == nil || p.w == nil || p.total <= 0 {
		return
	}
	p.mu.Lock()
	p.done, p.what, p.shown = done, what, true
	p.draw()
	p.mu.Unlock()
	p.ticker.Do(func() { go p.run() })
}

// draw writes the line; p.mu is held.
func (p *progressBar) draw() {
	fill := min(p.done*progressWidth/p.total, progressWidth)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d sizes, %.1f s, %s", strings.Repeat("#", fill), strings.Repeat(".", progressWidth-fill),
		p.done, p.total, time.Since(p.start).Seconds(), p.what)
}

// run redraws the shown bar every tick until clear.
func (p *progressBar) run() {
	t := time.NewTicker(p.tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.shown {
				p.draw()
			}
			p.mu.Unlock()
		}
	}
}

// between erases the bar, runs f (which prints a finished row, say) with
// no redraw under way, and leaves the bar off until the next show.
func (p *progressBar) between(f func() error) error {
	if p == nil || p.w == nil {
		return f()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
	return f()
}

// clear removes the bar for good, leaving the cursor at the start of an
// empty line.
func (p *progressBar) clear() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.shown = false
	fmt.Fprint(p.w, "\r\033[K")
}
