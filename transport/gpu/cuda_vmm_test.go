package gpu

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// passVMM between 14 ranks (more than a socket queue holds), twice: every
// rank gets a working descriptor from every peer; when one rank fails to
// use one, it still finishes its sends and takes in the rest, so no rank
// hangs, and the others are unaffected.
func TestPassVMM(t *testing.T) {
	const n = 14
	boxes := openBoxes(t, n)
	pipes := make([][2]*os.File, n)
	for r := range pipes {
		pr, pw := pipe(t)
		pipes[r] = [2]*os.File{pr, pw}
	}
	for round, failing := range []int{-1, 5} {
		tag := uint64(round + 1)
		sts := make([]cudaShare, n)
		got := make([]map[int]bool, n)
		var wg sync.WaitGroup
		start := time.Now()
		for r := range n {
			got[r] = map[int]bool{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := &CUDABackend{box: boxes[r]}
				b.passVMM(context.Background(), r, n, tag, int(pipes[r][1].Fd()), &sts[r], func(p, pfd int) error {
					if r == failing {
						return errors.New("cannot use it")
					}
					// A working duplicate of rank p's pipe writer.
					if _, err := unix.Write(pfd, []byte{byte(p)}); err != nil {
						return err
					}
					got[r][p] = true
					return nil
				})
			}()
		}
		wg.Wait()
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("round %d took %v", round, d)
		}
		for r := range n {
			switch {
			case r == failing && sts[r].Err != "cannot use it":
				t.Errorf("round %d: rank %d: %q, want its failure", round, r, sts[r].Err)
			case r != failing && (sts[r].Err != "" || len(got[r]) != n-1):
				t.Errorf("round %d: rank %d: %q, %d descriptors", round, r, sts[r].Err, len(got[r]))
			}
		}
		// Every rank that used them wrote one byte into each peer's pipe.
		want := n - 1
		if failing >= 0 {
			want = n - 2
		}
		for r := range n {
			if r == failing {
				continue
			}
			buf := make([]byte, 64)
			pipes[r][0].SetReadDeadline(time.Now().Add(time.Second))
			total := 0
			for total < want {
				k, err := pipes[r][0].Read(buf)
				if err != nil {
					break
				}
				total += k
			}
			if total != want {
				t.Errorf("round %d: rank %d's pipe got %d bytes, want %d", round, r, total, want)
			}
		}
		for _, b := range boxes {
			b.Discard(tag)
			if b.Held() != 0 {
				t.Errorf("round %d: %d descriptors held after Discard", round, b.Held())
			}
		}
	}
}
