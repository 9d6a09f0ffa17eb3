package plot

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func chart(series ...Series) Chart {
	return Chart{Title: "all-gather busbw", XLabel: "size (total output bytes)", YLabel: "busbw (GB/s)",
		X: []float64{10, 12, 14}, XTicks: []string{"1K", "4K", "16K"}, Series: series}
}

func TestNiceStep(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{0, 1}, {-3, 1}, {0.076, 0.1}, {0.1, 0.1}, {0.11, 0.2}, {3, 5}, {76.6, 100}, {20, 20}, {21, 50}, {501, 1000},
	} {
		if got := niceStep(c.in); got != c.want {
			t.Errorf("niceStep(%g) = %g, want %g", c.in, got, c.want)
		}
	}
}

// The Y axis reaches the smallest nice value at or above every point, and
// its ticks are labelled without float noise.
func TestLayout(t *testing.T) {
	l := chart(Series{Y: []float64{1, 383.4, 2}}, Series{Y: []float64{0.5, 266, 3}}).layout()
	if l.ymax != 500 || l.step != 100 {
		t.Errorf("ymax %g step %g, want 500 and 100", l.ymax, l.step)
	}
	l = chart(Series{Y: []float64{0.01, 0.38, 0.2}}).layout()
	if _, s := l.yTick(3); l.ymax != 0.5 || s != "0.3" {
		t.Errorf("ymax %g, tick 3 %q: want 0.5 and 0.3", l.ymax, s)
	}
	if got := l.py(l.ymax); got != marginT {
		t.Errorf("top of the axis at y=%g, want %d", got, marginT)
	}
	if got := l.px(14); got != width-marginR {
		t.Errorf("last point at x=%g, want %d", got, width-marginR)
	}
}

func TestSVG(t *testing.T) {
	s := string(chart(Series{"luacoll", Blue, []float64{1, 2, 3}}, Series{"NCCL <ref>", Red, []float64{1, 1, 2}}).SVG())
	for _, want := range []string{`stroke="#1f77b4"`, `stroke="#d62728"`, ">luacoll<", ">NCCL &lt;ref&gt;<", ">16K<", ">busbw (GB/s)<", ">5<"} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG misses %s:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "<polyline"); n != 2 {
		t.Errorf("%d lines, want 2", n)
	}
	if s := string(chart(Series{"gap", Blue, []float64{1, math.NaN(), math.Inf(1)}}).SVG()); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		t.Errorf("non-finite points drawn:\n%s", s)
	}
	if empty := string(Chart{Title: "none"}.SVG()); strings.Contains(empty, "<polyline") || !strings.Contains(empty, ">none<") {
		t.Errorf("empty chart: %s", empty)
	}
}

func decode(t *testing.T, c Chart) *image.RGBA {
	t.Helper()
	data, err := c.PNG()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Fatalf("image %v, want %dx%d", b, width, height)
	}
	rgba := image.NewRGBA(img.Bounds())
	for y := range height {
		for x := range width {
			rgba.Set(x, y, img.At(x, y))
		}
	}
	return rgba
}

// count is how many pixels of r have colour c.
func count(img *image.RGBA, r image.Rectangle, c color.RGBA) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if img.RGBAAt(x, y) == c {
				n++
			}
		}
	}
	return n
}

// The PNG draws each series where its points are, in its colour, with the
// legend, the axes and the labels in black.
func TestPNG(t *testing.T) {
	// Blue climbs from 0 to the top of the axis (5); green stays at 0.
	img := decode(t, chart(Series{"luacoll", Blue, []float64{0, 2.5, 5}}, Series{"built-in", Green, []float64{0, 0, 0}}))
	l := chart(Series{Y: []float64{5}}).layout()
	mid := image.Pt(int(l.px(12)), int(l.py(2.5)))
	if n := count(img, image.Rectangle{Min: mid.Sub(image.Pt(2, 2)), Max: mid.Add(image.Pt(3, 3))}, Blue); n == 0 {
		t.Errorf("no blue at the middle point %v", mid)
	}
	top := image.Pt(int(l.px(14)), int(l.py(5)))
	if n := count(img, image.Rectangle{Min: top.Sub(image.Pt(3, 3)), Max: top.Add(image.Pt(3, 3))}, Blue); n == 0 {
		t.Errorf("no blue at the last point %v", top)
	}
	plotArea := image.Rect(marginL+40, int(l.py(4)), width-marginR, height-marginB-3)
	if n := count(img, plotArea, Green); n != 0 {
		t.Errorf("%d green pixels above the zero line", n)
	}
	if n := count(img, image.Rect(marginL, height-marginB-3, width, height-marginB+3), Green); n < 400 {
		t.Errorf("%d green pixels along the zero line, want a line", n)
	}
	for name, r := range map[string]image.Rectangle{
		"title":         image.Rect(marginL, 5, width, 25),
		"Y label":       image.Rect(5, marginT, 25, height-marginB),
		"X label":       image.Rect(marginL, height-30, width, height),
		"X tick labels": image.Rect(marginL, height-marginB+4, width, height-marginB+20),
		"legend names":  image.Rect(marginL+36, marginT, marginL+200, marginT+40),
	} {
		if n := count(img, r, black); n < 20 {
			t.Errorf("%s: %d black pixels", name, n)
		}
	}
	if n := count(img, image.Rect(marginL+10, marginT, marginL+31, marginT+40), Green); n == 0 {
		t.Error("no legend line for the second series")
	}
	// A chart without series draws none of their colours.
	empty := decode(t, chart())
	if n := count(empty, empty.Bounds(), Blue) + count(empty, empty.Bounds(), Green); n != 0 {
		t.Errorf("%d series pixels in a chart without series", n)
	}
}

func TestWriteAndCheckPath(t *testing.T) {
	dir := t.TempDir()
	c := chart(Series{"luacoll", Blue, []float64{1, 2, 3}})
	for _, name := range []string{"a.svg", "b.PNG"} {
		p := filepath.Join(dir, name)
		if err := CheckPath(p); err != nil {
			t.Fatalf("CheckPath(%s): %v", name, err)
		}
		if err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".svg") != bytes.HasPrefix(data, []byte("<svg")) {
			t.Errorf("%s starts %q", name, data[:8])
		}
		if strings.HasSuffix(name, ".PNG") {
			if _, err := png.Decode(bytes.NewReader(data)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if err := CheckPath(filepath.Join(dir, "c.jpg")); !errors.Is(err, ErrFormat) {
		t.Errorf("c.jpg: %v", err)
	}
	if err := c.Write(filepath.Join(dir, "c.pdf")); !errors.Is(err, ErrFormat) {
		t.Errorf("Write c.pdf: %v", err)
	}
	if err := c.Write(filepath.Join(dir, "missing", "d.svg")); err == nil {
		t.Error("Write into a missing folder: no error")
	}
}
