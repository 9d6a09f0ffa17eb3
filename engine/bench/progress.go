package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progressBar is the one-line progress display of a benchmark over a list
// of sizes: "\r[#####.....] 5/10 sizes, 12.3 s, measuring 16777216 bytes",
// redrawn in place. A nil writer draws nothing.
type progressBar struct {
	w     io.Writer
	total int
	start time.Time
}

const progressWidth = 24

func newProgressBar(w io.Writer, total int) *progressBar {
	return &progressBar{w: w, total: total, start: time.Now()}
}

// show redraws the bar with done of total steps finished and what is
// under way.
func (p *progressBar) show(done int, what string) {
	if p == nil || p.w == nil || p.total <= 0 {
		return
	}
	fill := min(done*progressWidth/p.total, progressWidth)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d sizes, %.1f s, %s", strings.Repeat("#", fill), strings.Repeat(".", progressWidth-fill),
		done, p.total, time.Since(p.start).Seconds(), what)
}

// clear removes the bar, leaving the cursor at the start of an empty line.
func (p *progressBar) clear() {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
}
