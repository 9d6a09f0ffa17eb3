package transport

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

type lostErr struct{}

func (lostErr) Error() string        { return "ucp_ep_flush_nbx: Connection reset by remote peer" }
func (lostErr) Is(target error) bool { return target == ErrPeerLost }

type died struct{ rank int }

func (d *died) Error() string { return fmt.Sprintf("rank %d died", d.rank) }

// A lost connection is reported with the failure news that explains it,
// when the news comes within the grace; other errors pass unchanged.
func TestExplainPeerLost(t *testing.T) {
	lost := fmt.Errorf("flush to rank 3: %w", lostErr{})

	a := NewAbort()
	go func() { time.Sleep(20 * time.Millisecond); a.Set(&died{3}) }()
	err := explainPeerLost(lost, a, 5*time.Second)
	var d *died
	if !errors.As(err, &d) || d.rank != 3 || !errors.Is(err, ErrPeerLost) {
		t.Fatalf("got %v; want the death of rank 3 wrapped with the network error", err)
	}
	if want := "rank 3 died; the network said: flush to rank 3: ucp_ep_flush_nbx"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message %q; want it to start %q", err, want)
	}

	// No news within the grace: the bare error.
	if err := explainPeerLost(lost, NewAbort(), 10*time.Millisecond); err != lost {
		t.Fatalf("without news got %v; want the network error itself", err)
	}
	// An error that is not a lost connection does not wait.
	other := errors.New("ucp_put_nbx: invalid parameter")
	start := time.Now()
	if err := explainPeerLost(other, NewAbort(), 5*time.Second); err != other || time.Since(start) > time.Second {
		t.Fatalf("got %v after %v; want the error at once", err, time.Since(start))
	}
	if explainPeerLost(nil, a, time.Second) != nil {
		t.Fatal("nil error changed")
	}
}

// A device error is reported with the failure news that came with it
// (under MPS a client that dies mid-kernel can fault the others).
func TestExplainDeviceFault(t *testing.T) {
	fault := errors.New("cuStreamQuery: CUDA_ERROR_ILLEGAL_ADDRESS")
	a := NewAbort()
	a.Set(&died{1})
	err := ExplainDeviceFault(fault, a)
	if want := "rank 1 died; the device said: cuStreamQuery: CUDA_ERROR_ILLEGAL_ADDRESS"; err == nil || err.Error() != want {
		t.Fatalf("got %v; want %q", err, want)
	}
	if !errors.Is(err, fault) {
		t.Fatalf("%v does not wrap the device error", err)
	}
	if ExplainDeviceFault(fault, nil) != fault || ExplainDeviceFault(nil, a) != nil {
		t.Fatal("an error without an abort, or no error, changed")
	}
}
