package bootstrap

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ranks 2 and 3 of four have a wrong secret (one host started with
// another job's): the hub refuses them, and the other ranks' errors say
// so, naming them, rather than blaming only rank 1, whose connection
// ended when it gave up waiting.
func TestRefusedRanksAreNamed(t *testing.T) {
	// Rank 1 gives up first (its connection ends before rank 0's wait),
	// then rank 0 first (its own wait times out).
	for _, first := range []int{1, 0} {
		refusedRanks(t, first)
	}
}

func refusedRanks(t *testing.T, first int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var log logLines
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{Rank: r, Size: 4, Addr: addr, Timeout: 2 * time.Second, Secret: "job-a", Log: log.add}
			if r == 0 {
				cfg.Listener = ln
			}
			if r == first {
				cfg.Timeout = 1500 * time.Millisecond
			}
			if r >= 2 {
				cfg.Secret = "job-b"
			}
			b, err := Connect(context.Background(), cfg)
			if err == nil {
				b.Close()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d joined", r)
		}
	}
	if msg := errs[0].Error(); !strings.Contains(msg, "ranks 2, 3 were refused: they do not know this job's secret") {
		t.Errorf("rank %d gave up first; rank 0: %v", first, errs[0])
	}
}
