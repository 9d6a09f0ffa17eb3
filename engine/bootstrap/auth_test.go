package bootstrap

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// logLines collects the hub's notes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A connection that does not know the job's secret (a rank of another
// job, a stranger speaking garbage) is refused with a log line, and the job
// goes on: the real rank still joins and the job works.
func TestHubRefusesWhoLacksTheSecret(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var log logLines
	type result struct {
		b   *Bootstrap
		err error
	}
	rank0 := make(chan result, 1)
	go func() {
		b, err := Connect(context.Background(), Config{Rank: 0, Size: 2, Listener: ln, Timeout: 20 * time.Second,
			Secret: "job-a", Log: log.add})
		rank0 <- result{b, err}
	}()
	ctx := context.Background()
	_, err = Connect(ctx, Config{Rank: 1, Size: 2, Addr: addr, Timeout: 5 * time.Second, Secret: "job-b"})
	if err == nil || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), EnvJobSecret) {
		t.Fatalf("rank of another job: %v", err)
	}
	// A stranger that sends a truncated hello.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	if typ, _, err := readFrame(br, maxBootFrame); err != nil || typ != frChallenge {
		t.Fatalf("stranger: first frame %d, %v", typ, err)
	}
	f := newFrame(frHello, 8)
	f.u8(bootVersion)
	f.u32(1)
	frame, _ := f.finish()
	c.Write(frame)
	if _, _, err := readFrame(br, maxBootFrame); err == nil {
		t.Error("the hub answered a malformed hello")
	}
	c.Close()
	// The job goes on.
	b1, err := Connect(ctx, Config{Rank: 1, Size: 2, Addr: addr, Timeout: 10 * time.Second, Secret: "job-a"})
	if err != nil {
		t.Fatalf("the real rank 1: %v", err)
	}
	r0 := <-rank0
	if r0.err != nil {
		t.Fatalf("rank 0: %v", r0.err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r, b := range []*Bootstrap{r0.b, b1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var all [][]byte
			all, errs[r] = b.AllGather(ctx, []byte{byte(r)})
			if errs[r] == nil && (len(all) != 2 || all[1][0] != 1) {
				errs[r] = net.UnknownNetworkError("bad allgather")
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	b1.Close()
	r0.b.Close()
	got := log.all()
	for _, want := range []string{"refused a connection from", "(says rank 1): it does not know this job's secret", "malformed hello", "the job goes on"} {
		if !strings.Contains(got, want) {
			t.Errorf("hub log lacks %q:\n%s", want, got)
		}
	}
}

// A rank does not join a hub that cannot prove it knows the secret.
func TestRankRefusesAHubWithoutTheSecret(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		ch := newFrame(frChallenge, nonceLen)
		ch.raw(make([]byte, nonceLen))
		frame, _ := ch.finish()
		c.Write(frame)
		readFrame(bufio.NewReader(c), maxBootFrame) // the hello
		acc := newFrame(frAccept, 32)
		acc.raw(make([]byte, 32))
		frame, _ = acc.finish()
		c.Write(frame)
		time.Sleep(time.Second)
	}()
	_, err = Connect(context.Background(), Config{Rank: 1, Size: 2, Addr: ln.Addr().String(), Timeout: 5 * time.Second, Secret: "s"})
	if err == nil || !strings.Contains(err.Error(), "does not know this job's secret") {
		t.Fatalf("fake hub: %v", err)
	}
}
