package plot

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Chart is a line chart: every series has one Y value per X point.
type Chart struct {
	Title, XLabel, YLabel string
	// X holds the points' positions on the horizontal axis (any increasing
	// scale, e.g. log2 of a size) and XTicks their labels.
	X      []float64
	XTicks []string
	Series []Series
}

// Series is one line of a chart, named in the legend.
type Series struct {
	Name  string
	Color color.RGBA
	Y     []float64
}

// Colors for the series, in the order charts use them.
var (
	Blue   = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	Green  = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	Red    = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	Orange = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
)

// Canvas size and margins (pixels) of every chart.
const (
	width, height                      = 720, 440
	marginL, marginR, marginT, marginB = 70, 20, 40, 60
	yTicks                             = 5
)

// ErrFormat reports a file name whose ending names no format this package
// writes.
var ErrFormat = errors.New("plots are written as .svg or .png")

// CheckPath returns an error unless path ends in .svg or .png, so a run can
// check its plot's name before it measures anything.
func CheckPath(path string) error {
	_, err := format(path)
	return err
}

// format is ".svg" or ".png" from path's ending (any case), else an error.
func format(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png":
		return ext, nil
	}
	return "", fmt.Errorf("%q: %w", path, ErrFormat)
}

// Write renders c in the format that path's ending names and writes it.
func (c Chart) Write(path string) error {
	ext, err := format(path)
	if err != nil {
		return err
	}
	var data []byte
	if ext == ".png" {
		if data, err = c.PNG(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	} else {
		data = c.SVG()
	}
	return os.WriteFile(path, data, 0o644)
}

// layout maps data to canvas coordinates.
type layout struct {
	x0, x1 float64 // X range
	ymax   float64 // top of the Y axis
	step   float64 // between Y ticks
}

func (c Chart) layout() layout {
	l := layout{x0: 0, x1: 1}
	if len(c.X) > 0 {
		l.x0, l.x1 = c.X[0], c.X[len(c.X)-1]
	}
	if l.x1 <= l.x0 {
		l.x1 = l.x0 + 1
	}
	top := 0.0
	for _, s := range c.Series {
		for _, y := range s.Y {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				top = math.Max(top, y)
			}
		}
	}
	l.step = niceStep(top / yTicks)
	l.ymax = l.step * yTicks
	return l
}

// niceStep is the smallest of 1, 2, 5 times a power of ten that is at
// least v (1 for v <= 0).
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

func (l layout) px(x float64) float64 {
	return marginL + (x-l.x0)/(l.x1-l.x0)*(width-marginL-marginR)
}

func (l layout) py(y float64) float64 {
	return height - marginB - y/l.ymax*(height-marginT-marginB)
}

// yTick is the label of the i-th Y tick.
func (l layout) yTick(i int) (float64, string) {
	v := l.step * float64(i)
	return v, fmt.Sprintf("%g", math.Round(v*1e6)/1e6)
}

// legendY is the baseline height of the i-th legend entry's line.
func legendY(i int) float64 { return marginT + 10 + 16*float64(i) }
