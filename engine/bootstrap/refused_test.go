package bootstrap

import (
	"context"
	"fmt"
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

// A rank started with another job size is refused; rank 0, waiting for
// it, says why it never joins.
func TestRefusedSizeAndRankAreNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var log logLines
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, c := range []Config{
		{Rank: 0, Size: 2, Listener: ln, Timeout: 1500 * time.Millisecond},
		{Rank: 1, Size: 3, Timeout: time.Second},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				time.Sleep(100 * time.Millisecond) // after the hub is up
			}
			c.Addr, c.Secret, c.Log = addr, "job-a", log.add
			b, err := Connect(context.Background(), c)
			if err == nil {
				b.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	msg := fmt.Sprint(errs[0])
	if want := "(waiting for rank 1): rank 1 was refused: rank 1 says the job has 3 ranks, rank 0 says 2"; !strings.Contains(msg, want) {
		t.Errorf("rank 0: %s\nlacks %q", msg, want)
	}
}
