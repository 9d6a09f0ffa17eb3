// Package plot draws the line charts of luacoll's benchmarks (busbw against
// size, one line per implementation) as SVG or PNG. Both renderers share one
// layout, so the two files of a run show the same chart.
//
// Imports: none
package plot
