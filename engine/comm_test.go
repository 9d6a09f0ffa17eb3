package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/engine/launch"
	"golang.org/x/sys/unix"
)

// A collective refused by Comm.Refuse fails at once on that rank, contacts
// nobody and is not counted: the next collective every rank calls pairs up
// as it should.
func TestRefusedCollectiveKeepsRanksInStep(t *testing.T) {
	errs := enginetest.WithComms(t, 3, engine.Options{Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		if r == 0 {
			c.Refuse = func(call string) error { return fmt.Errorf("not now: %s", call) }
			start := time.Now()
			err := c.Barrier(ctx)
			if err == nil || !strings.Contains(err.Error(), "not now: barrier()") {
				return fmt.Errorf("refused barrier: %v", err)
			}
			if d := time.Since(start); d > time.Second {
				return fmt.Errorf("the refusal took %v", d)
			}
			c.Refuse = nil
		}
		all, err := c.Collective(ctx, "gather", []byte(fmt.Sprint(r)))
		if err != nil {
			return err
		}
		if got := fmt.Sprintf("%s", all); got != "[0 1 2]" {
			return fmt.Errorf("gathered %s", got)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A status collective that fails names each message once, with the ranks
// that brought it; the lowest failed rank reports it for the job.
func TestStatusErrorGroups(t *testing.T) {
	for _, c := range []struct {
		msgs     []string
		want     string
		reporter int
	}{
		{[]string{"no GPU", "no GPU", "no GPU"}, "open failed on ranks 0-2: no GPU", 0},
		{[]string{"", "no GPU", "", "no GPU"}, "open failed on ranks 1,3: no GPU", 1},
		{[]string{"x", "y", "x", ""}, "open failed: ranks 0,2: x; rank 1: y", 0},
	} {
		e := &engine.StatusError{Call: "open", Msgs: c.msgs}
		if e.Error() != c.want || e.Reporter() != c.reporter {
			t.Errorf("%q: %q reported by %d, want %q by %d", c.msgs, e.Error(), e.Reporter(), c.want, c.reporter)
		}
	}
}

// Bootstrap errors name the bootstrap once ("bootstrap connect ...", not
// "bootstrap: bootstrap connect ...").
func TestOpenErrorNamesTheBootstrapOnce(t *testing.T) {
	for _, env := range []launch.RankEnv{
		{Rank: 1, Size: 2, Addr: "127.0.0.1:1"},
		{Rank: 0, Size: 2, Addr: "192.0.2.1:29500"}, // not this host's: cannot listen
	} {
		_, err := engine.Open(context.Background(), env, engine.Options{Timeout: 300 * time.Millisecond}, nil)
		if err == nil || strings.Count(err.Error(), "bootstrap") != 1 {
			t.Errorf("rank %d: %v", env.Rank, err)
		}
	}
}

// A rank still joining the job stops as soon as its launcher closes the
// join pipe (a rank failed before every rank joined), not after its
// timeout, and says so.
func TestOpenStopsWhenTheJoinPipeEnds(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fd, err := syscall.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	env := launch.RankEnv{Rank: 1, Size: 2, Addr: "127.0.0.1:1", JoinFD: fd} // nobody answers there
	time.AfterFunc(200*time.Millisecond, func() { w.Close() })
	start := time.Now()
	_, err = engine.Open(context.Background(), env, engine.Options{Timeout: 30 * time.Second}, nil)
	if err == nil || !strings.Contains(err.Error(), "the launcher gave up on the job while this rank was joining it") {
		t.Fatalf("error %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v: the rank waited for its timeout", took)
	}
	// The descriptor is closed once the rank no longer watches it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Errorf("the join pipe's descriptor %d is still open", fd)
	}
}
