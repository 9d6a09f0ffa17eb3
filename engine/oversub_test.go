package engine

import (
	"encoding/json"
	"testing"
)

// crowded counts the ranks of this host whose CPUs overlap this rank's.
func TestCrowded(t *testing.T) {
	offer := func(host string, pid int, cpus string) []byte {
		b, _ := json.Marshal(cpuOffer{Host: host, PID: pid, CPUs: cpus})
		return b
	}
	for _, c := range []struct {
		name         string
		me           int
		mine         []int
		offers       [][]byte
		over, shared bool
	}{
		{"2 ranks on 2 CPUs", 0, []int{0, 1}, [][]byte{offer("h", 1, "0-1"), offer("h", 2, "0-1")}, false, false},
		{"4 ranks on 2 CPUs", 1, []int{0, 1}, [][]byte{offer("h", 1, "0-1"), offer("h", 2, "0-1"), offer("h", 3, "0-1"), offer("h", 4, "0-1")}, true, false},
		{"bound one CPU each", 0, []int{0}, [][]byte{offer("h", 1, "0"), offer("h", 2, "1")}, false, false},
		{"two on one CPU", 0, []int{0}, [][]byte{offer("h", 1, "0"), offer("h", 2, "0")}, true, false},
		{"other host", 0, []int{0}, [][]byte{offer("h", 1, "0"), offer("g", 2, "0")}, false, false},
		{"one process", 0, []int{0, 1}, [][]byte{offer("h", 1, "0-1"), offer("h", 1, "0-1"), offer("h", 1, "0-1")}, true, true},
	} {
		over, shared := crowded(c.me, c.mine, c.offers)
		if over != c.over || shared != c.shared {
			t.Errorf("%s: crowded %v, shared %v; want %v, %v", c.name, over, shared, c.over, c.shared)
		}
	}
}
