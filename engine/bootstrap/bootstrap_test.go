package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// testTimeout bounds every bootstrap call in these tests.
const testTimeout = 5 * time.Second

type testJob struct {
	boots  []*Bootstrap
	aborts []*transport.Abort
}

// connectJob starts n ranks as goroutines on 127.0.0.1 and closes them when
// the test ends.
func connectJob(t *testing.T, n int, timeout time.Duration) *testJob {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	job := &testJob{boots: make([]*Bootstrap, n), aborts: make([]*transport.Abort, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		job.aborts[r] = transport.NewAbort()
		cfg := Config{Rank: r, Size: n, Addr: addr, Timeout: timeout,
			Abort: job.aborts[r], Host: fmt.Sprintf("host-%d", r)}
		if r == 0 {
			cfg.Listener = ln
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			job.boots[r], errs[r] = Connect(context.Background(), cfg)
		}()
	}
	waitOrFail(t, &wg, 10*time.Second, "connect")
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: connect: %v", r, err)
		}
	}
	t.Cleanup(func() { job.closeAll(t) })
	return job
}

// closeAll closes every rank concurrently (rank 0 waits for the others).
func (j *testJob) closeAll(t *testing.T) []error {
	t.Helper()
	errs := make([]error, len(j.boots))
	var wg sync.WaitGroup
	for r, b := range j.boots {
		if b == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = b.Close()
		}()
	}
	waitOrFail(t, &wg, 15*time.Second, "close")
	return errs
}

// run calls fn on every rank concurrently and returns the errors by rank.
func (j *testJob) run(t *testing.T, fn func(b *Bootstrap) error) []error {
	t.Helper()
	errs := make([]error, len(j.boots))
	var wg sync.WaitGroup
	for r, b := range j.boots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(b)
		}()
	}
	waitOrFail(t, &wg, 20*time.Second, "ranks")
	return errs
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still running after %v", what, d)
	}
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func TestBootstrapCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			job := connectJob(t, n, testTimeout)
			ctx := context.Background()
			contribution := func(r int) []byte {
				if r == 1 {
					return nil // an empty contribution
				}
				return bytes.Repeat([]byte{byte(r)}, 1+r*1000)
			}
			noErrors(t, job.run(t, func(b *Bootstrap) error {
				if b.Rank() < 0 || b.Size() != n {
					return fmt.Errorf("rank %d size %d", b.Rank(), b.Size())
				}
				all, err := b.AllGather(ctx, contribution(b.Rank()))
				if err != nil {
					return err
				}
				if len(all) != n {
					return fmt.Errorf("allgather: %d entries", len(all))
				}
				for r, d := range all {
					if !bytes.Equal(d, contribution(r)) {
						return fmt.Errorf("allgather: rank %d's data is %d bytes, want %d", r, len(d), len(contribution(r)))
					}
				}
				for _, root := range []int{0, n - 1} {
					got, err := b.Broadcast(ctx, root, []byte(fmt.Sprintf("from %d as root %d", b.Rank(), root)))
					if err != nil {
						return err
					}
					if want := fmt.Sprintf("from %d as root %d", root, root); string(got) != want {
						return fmt.Errorf("broadcast: got %q, want %q", got, want)
					}
				}
				if err := b.Barrier(ctx); err != nil {
					return err
				}
				next, prev := (b.Rank()+1)%n, (b.Rank()+n-1)%n
				if err := b.Send(ctx, next, 7, []byte(fmt.Sprintf("hello %d->%d", b.Rank(), next))); err != nil {
					return err
				}
				got, err := b.Recv(ctx, prev, 7)
				if err != nil {
					return err
				}
				if want := fmt.Sprintf("hello %d->%d", prev, b.Rank()); string(got) != want {
					return fmt.Errorf("recv: got %q, want %q", got, want)
				}
				return nil
			}))
			for r, b := range job.boots {
				if b.JobID() != job.boots[0].JobID() || len(b.JobID()) != 16 {
					t.Errorf("rank %d: job id %q, rank 0 has %q", r, b.JobID(), job.boots[0].JobID())
				}
				hosts := b.Hosts()
				for h := range n {
					if hosts[h] != fmt.Sprintf("host-%d", h) {
						t.Errorf("rank %d: hosts %q", r, hosts)
						break
					}
				}
			}
			for r, err := range job.closeAll(t) {
				if err != nil {
					t.Errorf("rank %d: close: %v", r, err)
				}
				if err := job.aborts[r].Err(); err != nil {
					t.Errorf("rank %d: spurious abort: %v", r, err)
				}
			}
		})
	}
}

func TestBootstrapJobIDFromRank0(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Connect(context.Background(), Config{Rank: 0, Size: 1, Listener: ln, JobID: "myjob", Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if b.JobID() != "myjob" {
		t.Errorf("job id %q, want myjob", b.JobID())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AllGather(context.Background(), nil); !errors.Is(err, ErrBootstrapClosed) {
		t.Errorf("allgather after close: %v, want ErrBootstrapClosed", err)
	}
}

func TestBootstrapSendBeforeRecv(t *testing.T) {
	job := connectJob(t, 3, testTimeout)
	ctx := context.Background()
	noErrors(t, job.run(t, func(b *Bootstrap) error {
		switch b.Rank() {
		case 1:
			for i := range 3 {
				if err := b.Send(ctx, 0, 1, []byte(fmt.Sprintf("tag1 #%d", i))); err != nil {
					return err
				}
			}
			if err := b.Send(ctx, 0, 2, []byte("tag2")); err != nil {
				return err
			}
		case 2:
			if err := b.Send(ctx, 0, 1, []byte("from 2")); err != nil {
				return err
			}
			if err := b.Send(ctx, 2, 5, []byte("self")); err != nil {
				return err
			}
		}
		// Every message is at rank 0 before it asks for any.
		if err := b.Barrier(ctx); err != nil {
			return err
		}
		if err := b.Barrier(ctx); err != nil {
			return err
		}
		switch b.Rank() {
		case 0:
			want := []struct {
				from int
				tag  uint32
				msg  string
			}{{1, 2, "tag2"}, {2, 1, "from 2"}, {1, 1, "tag1 #0"}, {1, 1, "tag1 #1"}, {1, 1, "tag1 #2"}}
			for _, w := range want {
				got, err := b.Recv(ctx, w.from, w.tag)
				if err != nil {
					return err
				}
				if string(got) != w.msg {
					return fmt.Errorf("recv from %d tag %d: got %q, want %q", w.from, w.tag, got, w.msg)
				}
			}
		case 2:
			got, err := b.Recv(ctx, 2, 5)
			if err != nil || string(got) != "self" {
				return fmt.Errorf("self recv: %q, %v", got, err)
			}
		}
		return nil
	}))
	// Recv waiting before the Send arrives.
	noErrors(t, job.run(t, func(b *Bootstrap) error {
		switch b.Rank() {
		case 0:
			got, err := b.Recv(ctx, 1, 9)
			if err != nil || string(got) != "late" {
				return fmt.Errorf("recv: %q, %v", got, err)
			}
		case 1:
			time.Sleep(50 * time.Millisecond)
			return b.Send(ctx, 0, 9, []byte("late"))
		}
		return nil
	}))
	if err := job.boots[0].Send(ctx, 3, 0, nil); err == nil {
		t.Errorf("send to rank 3 of 3: no error")
	}
}

func TestBootstrapManyAllGathers(t *testing.T) {
	job := connectJob(t, 4, testTimeout)
	ctx := context.Background()
	noErrors(t, job.run(t, func(b *Bootstrap) error {
		for i := range 1000 {
			all, err := b.AllGather(ctx, []byte(fmt.Sprintf("%d:%d", i, b.Rank())))
			if err != nil {
				return fmt.Errorf("allgather %d: %w", i, err)
			}
			for r, d := range all {
				if want := fmt.Sprintf("%d:%d", i, r); string(d) != want {
					return fmt.Errorf("allgather %d: rank %d sent %q, want %q", i, r, d, want)
				}
			}
		}
		return nil
	}))
}

func TestBootstrapRejects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	h := startHub(ln, 3, "job", testTimeout, jobKey(""), func(string) {})
	defer h.kill()

	firstDone := make(chan error, 1)
	go func() {
		b, err := Connect(context.Background(), Config{Rank: 1, Size: 3, Addr: addr, Timeout: testTimeout})
		if err == nil {
			b.Close()
			err = errors.New("connected without rank 0 and 2")
		}
		firstDone <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m := h.missingJoins(); len(m) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rank 1 never joined the hub")
		}
		time.Sleep(5 * time.Millisecond)
	}

	ctx := context.Background()
	_, err = Connect(ctx, Config{Rank: 1, Size: 3, Addr: addr, Timeout: testTimeout})
	if err == nil || !strings.Contains(err.Error(), "duplicate rank 1") {
		t.Errorf("duplicate rank: %v", err)
	}
	_, err = Connect(ctx, Config{Rank: 2, Size: 4, Addr: addr, Timeout: testTimeout})
	if err == nil || !strings.Contains(err.Error(), "rank 2 says the job has 4 ranks, rank 0 says 3") {
		t.Errorf("size mismatch: %v", err)
	}

	// A rank out of range (Connect checks that itself, so speak raw).
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	typ, hubNonce, err := readFrame(br, maxBootFrame)
	if err != nil || typ != frChallenge {
		t.Fatalf("first frame %d, %v; want a challenge", typ, err)
	}
	rankNonce := make([]byte, nonceLen)
	f := newFrame(frHello, 16)
	f.u8(bootVersion)
	f.u32(7)
	f.u32(3)
	f.raw(rankNonce)
	f.raw(helloMAC(jobKey(""), hubNonce, rankNonce, 7, 3, ""))
	frame, _ := f.finish()
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	typ, body, err := readFrame(br, maxBootFrame)
	if err != nil || typ != frReject || !strings.Contains(string(body), "rank 7 is out of range for 3 ranks") {
		t.Errorf("out of range: frame %d %q, %v", typ, body, err)
	}
	if m := h.missingJoins(); len(m) != 2 || m[0] != 0 || m[1] != 2 {
		t.Errorf("rejected clients changed the joined set: missing %v", m)
	}

	h.kill()
	select {
	case err := <-firstDone:
		if err == nil || !strings.Contains(err.Error(), "closed the connection before every rank joined") {
			t.Errorf("rank 1 after the hub went away: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("rank 1's Connect did not return after the hub went away")
	}
	if _, err := Connect(ctx, Config{Rank: 3, Size: 3, Addr: addr}); err == nil {
		t.Errorf("rank 3 of 3 accepted locally")
	}
}

// wantRankError checks that err names rank as failed (or died).
func wantRankError(t *testing.T, who int, err error, rank int, died bool, text string) {
	t.Helper()
	var re *RankError
	if !errors.As(err, &re) {
		t.Errorf("rank %d: error %v is not a RankError", who, err)
		return
	}
	if re.Rank != rank || re.Died != died {
		t.Errorf("rank %d: RankError %+v, want rank %d died=%v", who, re, rank, died)
	}
	if !strings.Contains(err.Error(), text) {
		t.Errorf("rank %d: error %q does not contain %q", who, err, text)
	}
}

// pendingAllGather runs AllGather on the given ranks and returns their
// errors and how long each took.
func pendingAllGather(job *testJob, ranks []int) (errs []error, took []time.Duration, wait func()) {
	errs = make([]error, len(job.boots))
	took = make([]time.Duration, len(job.boots))
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, errs[r] = job.boots[r].AllGather(context.Background(), []byte("x"))
			took[r] = time.Since(start)
		}()
	}
	return errs, took, wg.Wait
}

func TestBootstrapFailAborts(t *testing.T) {
	for _, failing := range []int{2, 0} {
		t.Run(fmt.Sprintf("rank%d", failing), func(t *testing.T) {
			job := connectJob(t, 4, testTimeout)
			var others []int
			for r := range 4 {
				if r != failing {
					others = append(others, r)
				}
			}
			errs, _, wait := pendingAllGather(job, others)
			time.Sleep(100 * time.Millisecond) // let them block
			start := time.Now()
			job.boots[failing].Fail("script.lua:5: boom")
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); wait() }()
			waitOrFail(t, &wg, time.Second, "pending allgathers after Fail")
			if d := time.Since(start); d > time.Second {
				t.Errorf("abort took %v", d)
			}
			text := fmt.Sprintf("rank %d failed: script.lua:5: boom", failing)
			for _, r := range others {
				wantRankError(t, r, errs[r], failing, false, text)
				wantRankError(t, r, job.aborts[r].Err(), failing, false, text)
				// Later calls fail at once with the same error.
				start := time.Now()
				err := job.boots[r].Barrier(context.Background())
				wantRankError(t, r, err, failing, false, text)
				if _, err := job.boots[r].Recv(context.Background(), 0, 1); err == nil {
					t.Errorf("rank %d: recv after abort succeeded", r)
				}
				if d := time.Since(start); d > 100*time.Millisecond {
					t.Errorf("rank %d: calls after abort took %v", r, d)
				}
			}
			wantRankError(t, failing, job.aborts[failing].Err(), failing, false, text)
			// Closing an aborted job does not wait for Timeout.
			start = time.Now()
			job.closeAll(t)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("closing the aborted job took %v", d)
			}
		})
	}
}

func TestBootstrapConnLost(t *testing.T) {
	job := connectJob(t, 4, testTimeout)
	errs, _, wait := pendingAllGather(job, []int{0, 1, 2})
	time.Sleep(50 * time.Millisecond)
	job.boots[3].conn.Close() // no goodbye
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); wait() }()
	waitOrFail(t, &wg, time.Second, "pending allgathers after a lost rank")
	for r := range 3 {
		wantRankError(t, r, errs[r], 3, true, "rank 3 died")
	}
}

func TestBootstrapHubLost(t *testing.T) {
	job := connectJob(t, 4, testTimeout)
	errs, _, wait := pendingAllGather(job, []int{1, 2, 3})
	time.Sleep(50 * time.Millisecond)
	job.boots[0].hub.kill()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); wait() }()
	waitOrFail(t, &wg, time.Second, "pending allgathers after the hub was lost")
	for r := 1; r < 4; r++ {
		wantRankError(t, r, errs[r], 0, true, "rank 0 died (lost the bootstrap connection)")
		if err := job.boots[r].Send(context.Background(), 0, 0, nil); err == nil {
			t.Errorf("rank %d: send after the hub was lost succeeded", r)
		}
	}
}

func TestBootstrapMismatch(t *testing.T) {
	job := connectJob(t, 3, testTimeout)
	errs := job.run(t, func(b *Bootstrap) error {
		if b.Rank() == 2 {
			time.Sleep(50 * time.Millisecond)
			return b.Barrier(context.Background())
		}
		_, err := b.AllGather(context.Background(), nil)
		return err
	})
	for r, err := range errs {
		wantRankError(t, r, err, 2, false, "called barrier #1 where rank")
	}
}

func TestBootstrapTimeout(t *testing.T) {
	job := connectJob(t, 3, 200*time.Millisecond)
	errs, took, wait := pendingAllGather(job, []int{0, 1})
	wait()
	timedOut := 0
	for r := range 2 {
		var te *TimeoutError
		if !errors.As(errs[r], &te) {
			// The other rank timed out a moment earlier and failed the job:
			// this one hears that instead of its own timer.
			var re *RankError
			if !errors.As(errs[r], &re) || re.Rank != 1-r || !strings.Contains(re.Reason, "no answer within 200ms") {
				t.Fatalf("rank %d: %v is neither a TimeoutError nor the other rank's failure", r, errs[r])
			}
			continue
		}
		timedOut++
		// The missing ranks are named unless the other timed-out rank's
		// failure reached this one first.
		want := "bootstrap allgather #1: no answer within 200ms (waiting for rank 2)"
		if got := errs[r].Error(); got != want && got != strings.TrimSuffix(want, " (waiting for rank 2)") {
			t.Errorf("rank %d: %q, want %q", r, errs[r], want)
		}
		if !errors.Is(errs[r], context.DeadlineExceeded) {
			t.Errorf("rank %d: not a deadline error", r)
		}
		if took[r] < 200*time.Millisecond || took[r] > 2*time.Second {
			t.Errorf("rank %d: timed out after %v", r, took[r])
		}
	}
	if timedOut == 0 {
		t.Error("no rank reported its own timeout")
	}
	// A timed-out collective fails the job: the late rank is told why
	// instead of pairing with a collective nobody is in any more.
	if _, err := job.boots[2].AllGather(context.Background(), nil); err == nil ||
		!strings.Contains(err.Error(), "failed: bootstrap allgather #1: no answer within 200ms") {
		t.Errorf("late rank: %v", err)
	}
	job = connectJob(t, 3, 200*time.Millisecond)
	_, err := job.boots[2].Recv(context.Background(), 1, 9)
	if want := "bootstrap recv from rank 1 tag 9: no answer within 200ms"; err == nil || err.Error() != want {
		t.Errorf("recv: %v, want %q", err, want)
	}
	// A shorter context deadline wins over Timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = job.boots[2].Recv(ctx, 0, 4)
	var te *TimeoutError
	if !errors.As(err, &te) || te.After > 50*time.Millisecond || te.After < 10*time.Millisecond ||
		!strings.HasPrefix(err.Error(), "bootstrap recv from rank 0 tag 4: no answer within ") {
		t.Errorf("recv with a 50ms context: %v", err)
	}
	// te.After above shows which deadline won; this only catches a hang
	// (generous: a loaded machine can stall the goroutines for a while).
	if d := time.Since(start); d > time.Second {
		t.Errorf("recv with a 50ms context took %v", d)
	}
	// Cancellation is reported as such.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := job.boots[2].Recv(ctx, 0, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("recv with a cancelled context: %v", err)
	}
	job.boots[2].Fail("end of test") // spare the others a long Close
}

func TestBootstrapConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	start := time.Now()
	_, err = Connect(context.Background(), Config{Rank: 0, Size: 3, Listener: ln, Timeout: 200 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "(waiting for ranks 1, 2)") {
		t.Errorf("rank 0 alone: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("rank 0's Connect took %v", d)
	}
	// The hub is gone: nobody listens there any more.
	_, err = Connect(context.Background(), Config{Rank: 1, Size: 3, Addr: addr, Timeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "cannot reach rank 0 at "+addr) {
		t.Errorf("rank 1 without a hub: %v", err)
	}
}

func TestBootstrapRank0StartsLate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	boots := make([]*Bootstrap, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r == 0 {
				time.Sleep(300 * time.Millisecond)
			}
			boots[r], errs[r] = Connect(context.Background(), Config{Rank: r, Size: 3, Addr: addr, Timeout: testTimeout})
			if errs[r] != nil {
				return
			}
			all, err := boots[r].AllGather(context.Background(), []byte{byte(r)})
			if err == nil && !bytes.Equal(bytes.Join(all, nil), []byte{0, 1, 2}) {
				err = fmt.Errorf("allgather: %v", all)
			}
			errs[r] = err
		}()
	}
	waitOrFail(t, &wg, 10*time.Second, "late rank 0")
	noErrors(t, errs)
	job := &testJob{boots: boots}
	noErrors(t, job.closeAll(t))
}

func TestBootstrapCloseOrder(t *testing.T) {
	for _, zeroFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("rank0first=%v", zeroFirst), func(t *testing.T) {
			job := connectJob(t, 4, testTimeout)
			noErrors(t, job.run(t, func(b *Bootstrap) error {
				if err := b.Send(context.Background(), (b.Rank()+1)%4, 1, []byte("bye")); err != nil {
					return err
				}
				return b.Barrier(context.Background())
			}))
			errs := make([]error, 4)
			var wg sync.WaitGroup
			closeRank := func(r int) {
				defer wg.Done()
				errs[r] = job.boots[r].Close()
			}
			wg.Add(4)
			if zeroFirst {
				go closeRank(0)
				time.Sleep(100 * time.Millisecond)
				for r := 1; r < 4; r++ {
					go closeRank(r)
				}
			} else {
				for r := 1; r < 4; r++ {
					go closeRank(r)
				}
				time.Sleep(100 * time.Millisecond)
				go closeRank(0)
			}
			waitOrFail(t, &wg, 5*time.Second, "close")
			for r := range 4 {
				if errs[r] != nil {
					t.Errorf("rank %d: close: %v", r, errs[r])
				}
				if err := job.aborts[r].Err(); err != nil {
					t.Errorf("rank %d: spurious abort: %v", r, err)
				}
			}
		})
	}
}

func TestBootstrapCloseWakesPending(t *testing.T) {
	job := connectJob(t, 2, testTimeout)
	done := make(chan error, 1)
	go func() {
		_, err := job.boots[1].Recv(context.Background(), 0, 3)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- job.boots[1].Close() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrBootstrapClosed) {
			t.Errorf("pending recv after close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("pending recv not woken by Close")
	}
	if err := <-closed; err != nil {
		t.Errorf("close: %v", err)
	}
	// A collective that can never complete: rank 1 is gone.
	_, err := job.boots[0].AllGather(context.Background(), nil)
	wantRankError(t, 0, err, 1, false, "rank 1 ended without error before allgather #1 (it made fewer collective calls than the ranks in this one)")
}

func TestFrames(t *testing.T) {
	f := newFrame(frColl, 0)
	f.u8(1)
	f.u32(0xdeadbeef)
	f.u64(1 << 40)
	f.bytes([]byte("abc"))
	f.raw([]byte("rest"))
	frame, err := f.finish()
	if err != nil {
		t.Fatal(err)
	}
	typ, body, err := readFrame(bytes.NewReader(frame), maxBootFrame)
	if err != nil || typ != frColl {
		t.Fatalf("readFrame: %d, %v", typ, err)
	}
	r := frameReader{b: body}
	if r.u8() != 1 || r.u32() != 0xdeadbeef || r.u64() != 1<<40 || string(r.bytes()) != "abc" ||
		string(r.rest()) != "rest" || r.err != nil {
		t.Errorf("round trip failed: %v", r.err)
	}
	r = frameReader{b: []byte{0, 0, 0, 9, 'x'}}
	if r.bytes(); r.err == nil {
		t.Errorf("short byte string accepted")
	}
	big := []byte{0x10, 0, 0, 1, byte(frColl)} // 256 MiB + 1
	if _, _, err := readFrame(bytes.NewReader(big), maxBootFrame); err == nil {
		t.Errorf("oversized frame accepted")
	}
	if _, _, err := readFrame(bytes.NewReader([]byte{0, 0, 0, 5, 1}), maxBootFrame); err == nil {
		t.Errorf("truncated frame accepted")
	}
	e := &RankError{Rank: 3, Died: true}
	if e.Error() != "rank 3 died" {
		t.Errorf("%q", e)
	}
	if got := DescribeRanks([]int{1, 2, 5}); got != "ranks 1, 2, 5" {
		t.Errorf("%q", got)
	}
}

// TestLeaveEarly: a rank that leaves on purpose says why; the others'
// barriers (teardown) go on without it, and a data collective fails
// naming why it left.
func TestLeaveEarly(t *testing.T) {
	job := connectJob(t, 3, testTimeout)
	if err := job.boots[1].Leave("exited early with os.exit(0) at s.lua:3"); err != nil {
		t.Fatalf("leave: %v", err)
	}
	errs := make(chan error, 2)
	for _, r := range []int{0, 2} {
		go func() { errs <- job.boots[r].Barrier(context.Background()) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("barrier without the rank that left: %v", err)
		}
	}
	_, err := job.boots[2].AllGather(context.Background(), nil)
	wantRankError(t, 2, err, 1, false, "rank 1 failed: exited early with os.exit(0) at s.lua:3, before allgather #2")
}
