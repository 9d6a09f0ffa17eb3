package bench

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuilder is a strings.Builder safe for the bar's ticker.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuilder) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func TestProgressBar(t *testing.T) {
	var b lockedBuilder
	p := newProgressBar(&b, 6)
	p.show(2, "measuring 4096 bytes")
	if got := b.String(); !strings.HasPrefix(got, "\r\033[K[########................] 2/6 sizes, ") || !strings.HasSuffix(got, " s, measuring 4096 bytes") {
		t.Errorf("bar %q", got)
	}
	b.Reset()
	p.show(6, "done")
	p.clear()
	if got := b.String(); !strings.Contains(got, "[########################] 6/6") || !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("full bar then clear: %q", got)
	}
	var nobar *progressBar
	nobar.show(1, "x") // no writer: draws nothing, no panic
	newProgressBar(nil, 3).show(1, "x")
	nobar.clear()
	if err := nobar.between(func() error { return errors.New("e") }); err == nil {
		t.Error("between on no bar dropped f's error")
	}
}

// TestProgressBarMoves: while one size is measured the bar redraws itself
// with the time gone by; between erases it and keeps it off until the
// next show; clear stops the redraws.
func TestProgressBarMoves(t *testing.T) {
	var b lockedBuilder
	p := newProgressBar(&b, 3)
	p.tick = 5 * time.Millisecond
	p.show(0, "measuring 1024 bytes")
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(b.String(), "0/3 sizes") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the bar was not redrawn while a size was measured: %q", b.String())
		}
		time.Sleep(time.Millisecond)
	}
	err := p.between(func() error {
		b.Reset()
		time.Sleep(30 * time.Millisecond) // several ticks: none may draw
		if got := b.String(); got != "" {
			t.Errorf("bar drawn while a row was printed: %q", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p.show(1, "measuring 2048 bytes")
	p.clear()
	b.Reset()
	time.Sleep(30 * time.Millisecond)
	if got := b.String(); got != "" {
		t.Errorf("bar drawn after clear: %q", got)
	}
}
