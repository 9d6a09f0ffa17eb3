package plot

import (
	"fmt"
	"image/color"
	"math"
	"strings"
)

// SVG renders the chart as a standalone SVG document.
func (c Chart) SVG() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="14">%s</text>`+"\n", marginL, xmlEscape(c.Title))
	if len(c.X) == 0 {
		b.WriteString("</svg>\n")
		return []byte(b.String())
	}
	l := c.layout()
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", marginL, height-marginB, width-marginR, height-marginB)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", marginL, marginT, marginL, height-marginB)
	for i := 0; i <= yTicks; i++ {
		v, label := l.yTick(i)
		y := l.py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			marginL, y, width-marginR, y, marginL-6, y+4, label)
	}
	for i, x := range c.X {
		if i < len(c.XTicks) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", l.px(x), height-marginB+16, xmlEscape(c.XTicks[i]))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (width+marginL)/2, height-16, xmlEscape(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (height+marginT-marginB)/2, xmlEscape(c.YLabel))
	for i, s := range c.Series {
		var pts []string
		for j, x := range c.X {
			if j < len(s.Y) && !math.IsNaN(s.Y[j]) && !math.IsInf(s.Y[j], 0) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", l.px(x), l.py(s.Y[j])))
			}
		}
		col := hex(s.Color)
		ly := legendY(i)
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<line x1="%d" y1="%g" x2="%d" y2="%g" stroke="%s" stroke-width="2"/><text x="%d" y="%g">%s</text>`+"\n",
			marginL+10, ly, marginL+30, ly, col, marginL+36, ly+4, xmlEscape(s.Name))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
