package plot

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

var (
	black = color.RGBA{0, 0, 0, 0xff}
	grid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
)

// PNG renders the chart as a PNG image of the same layout as SVG, with a
// 7x13 bitmap font.
func (c Chart) PNG() ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	p := canvas{img}
	p.text(marginL, 22, c.Title, 0)
	if len(c.X) > 0 {
		l := c.layout()
		for i := 0; i <= yTicks; i++ {
			v, label := l.yTick(i)
			y := l.py(v)
			if i > 0 {
				p.line(marginL, y, width-marginR, y, 1, grid)
			}
			p.text(marginL-6, y+4, label, 1)
		}
		p.line(marginL, height-marginB, width-marginR, height-marginB, 1, black)
		p.line(marginL, marginT, marginL, height-marginB, 1, black)
		for i, x := range c.X {
			if i < len(c.XTicks) {
				p.text(l.px(x), height-marginB+16, c.XTicks[i], 0.5)
			}
		}
		p.text((width+marginL)/2, height-16, c.XLabel, 0.5)
		p.textUp(16, (height+marginT-marginB)/2, c.YLabel)
		for i, s := range c.Series {
			for j := 1; j < len(c.X) && j < len(s.Y); j++ {
				p.line(l.px(c.X[j-1]), l.py(s.Y[j-1]), l.px(c.X[j]), l.py(s.Y[j]), 2, s.Color)
			}
			ly := legendY(i)
			p.line(marginL+10, ly, marginL+30, ly, 2, s.Color)
			p.text(marginL+36, ly+4, s.Name, 0)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type canvas struct{ img *image.RGBA }

// line draws a segment w pixels wide.
func (p canvas) line(x0, y0, x1, y1, w float64, c color.RGBA) {
	if math.IsNaN(y0+y1) || math.IsInf(y0+y1, 0) {
		return
	}
	steps := int(math.Ceil(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))*2)) + 1
	r := image.Rect(0, 0, int(w), int(w))
	off := (w - 1) / 2
	for i := 0; i <= steps; i++ {
		t := float64(i) / float64(steps)
		x := int(math.Round(x0 + t*(x1-x0) - off))
		y := int(math.Round(y0 + t*(y1-y0) - off))
		draw.Draw(p.img, r.Add(image.Pt(x, y)), image.NewUniform(c), image.Point{}, draw.Src)
	}
}

var face = basicfont.Face7x13

// text draws s with its baseline at y; anchor 0 puts x at its start, 0.5
// at its middle, 1 at its end.
func (p canvas) text(x, y float64, s string, anchor float64) {
	w := font.MeasureString(face, s).Round()
	d := font.Drawer{Dst: p.img, Src: image.NewUniform(black), Face: face,
		Dot: fixed.P(int(math.Round(x-anchor*float64(w))), int(math.Round(y)))}
	d.DrawString(s)
}

// textUp draws s read from bottom to top, centred on (x, y).
func (p canvas) textUp(x, y float64, s string) {
	w := font.MeasureString(face, s).Round()
	h := face.Height
	tmp := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(tmp, tmp.Bounds(), image.White, image.Point{}, draw.Src)
	d := font.Drawer{Dst: tmp, Src: image.NewUniform(black), Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s)
	// (i, j) of the text lands at (x0 + j, y0 - i).
	x0, y0 := int(math.Round(x))-h/2, int(math.Round(y))+w/2
	for i := range w {
		for j := range h {
			if c := tmp.RGBAAt(i, j); c != (color.RGBA{0xff, 0xff, 0xff, 0xff}) {
				p.img.SetRGBA(x0+j, y0-i, c)
			}
		}
	}
}
