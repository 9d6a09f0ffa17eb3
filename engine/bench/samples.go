package bench

import "sort"

// maxSamples bounds the timings a median keeps: a run of many iterations
// (--iters 100000000) keeps an even spread of them, not one per iteration.
const maxSamples = 1 << 16

// samples keeps timings in bounded memory: once full it drops every other
// kept one and from then on keeps every stride-th added, so what it holds
// stays an even spread over the whole run.
type samples struct {
	kept   []float64
	stride int // keep one of this many added
	seen   int // added since the last kept one
}

// add records one timing.
func (s *samples) add(sec float64) {
	if s.stride == 0 {
		s.stride = 1
	}
	if s.seen++; s.seen < s.stride {
		return
	}
	s.seen = 0
	if len(s.kept) == maxSamples {
		half := s.kept[:0]
		for i := 1; i < len(s.kept); i += 2 {
			half = append(half, s.kept[i])
		}
		s.kept = half
		s.stride *= 2
	}
	s.kept = append(s.kept, sec)
}

// median is the median of the kept timings (0 when there are none). It
// sorts them: call it after the last add.
func (s *samples) median() float64 {
	if len(s.kept) == 0 {
		return 0
	}
	sort.Float64s(s.kept)
	return s.kept[len(s.kept)/2]
}
