package mpi

import (
	"errors"
	"strings"
	"testing"
)

// Load finds Open MPI's library and its entry points, or says which
// package to install; calls that need no MPI_Init behave.
func TestLoad(t *testing.T) {
	l, err := Load()
	if errors.Is(err, ErrNotFound) {
		if !strings.Contains(err.Error(), "openmpi-bin") {
			t.Errorf("error does not name the package: %v", err)
		}
		t.Skipf("no Open MPI here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if v := l.Version(); !strings.HasPrefix(v, "Open MPI") || strings.Contains(v, "\n") {
		t.Errorf("version %q", v)
	}
	// Refused before MPI is called: the count is an int.
	if err := l.Allgather(0, 0, MaxCount+1); err == nil || !strings.Contains(err.Error(), "int count") {
		t.Errorf("oversized count: %v", err)
	}
	// Nothing to finalize before Init.
	if err := l.Finalize(); err != nil {
		t.Errorf("Finalize before Init: %v", err)
	}
}
