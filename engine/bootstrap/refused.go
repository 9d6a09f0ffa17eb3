package bootstrap

import (
	"fmt"
	"strings"
)

// refusedNote says which ranks the hub still waits for were refused, and
// why ("" when none): mostly why they never join.
func (h *hub) refusedNote() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refusedNoteLocked()
}

func (h *hub) refusedNoteLocked() string {
	var whys []string
	byWhy := map[string][]int{}
	for r, p := range h.peers {
		if why, ok := h.refused[r]; ok && p == nil {
			if byWhy[why] == nil {
				whys = append(whys, why)
			}
			byWhy[why] = append(byWhy[why], r)
		}
	}
	var notes []string
	for _, why := range whys {
		ranks := byWhy[why]
		verb, who := "was", "it does"
		if len(ranks) > 1 {
			verb, who = "were", "they do"
		}
		if why == whySecret {
			why = fmt.Sprintf("%s not know this job's secret (%s; a host started with another job's?)", who, EnvJobSecret)
		}
		notes = append(notes, fmt.Sprintf("%s %s refused: %s", DescribeRanks(ranks), verb, why))
	}
	return strings.Join(notes, "; ")
}

// whySecret is refused's reason for a hello that lacked the job's secret.
const whySecret = "secret"

// noteRefused records why a hello that said it was rank was refused.
func (h *hub) noteRefused(rank uint32, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if uint64(rank) >= uint64(h.size) {
		return // (a rank out of range is refused before it could be waited for)
	}
	if h.refused == nil {
		h.refused = map[int]string{}
	}
	h.refused[int(rank)] = why
}
