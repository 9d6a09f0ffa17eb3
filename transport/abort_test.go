package transport

import (
	"errors"
	"testing"
)

func TestAbortFirstReasonWins(t *testing.T) {
	a := NewAbort()
	if a.Err() != nil {
		t.Fatal("fresh abort is set")
	}
	first := errors.New("rank 2 died")
	if !a.Set(first) {
		t.Fatal("first Set reported no effect")
	}
	if a.Set(errors.New("later")) {
		t.Fatal("second Set reported an effect")
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("Done not closed after Set")
	}
	if !errors.Is(a.Err(), first) {
		t.Fatalf("Err = %v, want %v", a.Err(), first)
	}
}
