package shm

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A segment is mapped once per process: the ranks that map it again get
// the same mapping, by descriptor or by name, and the last to let go
// unmaps it.
func TestProcMapsShareOneMapping(t *testing.T) {
	s := &segMaps{byKey: map[segKey]*segMap{}, byAddr: map[uintptr]*segMap{}, byName: map[string]*segMap{}, id: "test"}
	const size = 8192
	fd, own, err := CreateSegment("procmaps-test", size)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	s.own("seg-a", fd, own)
	byFD, err := s.peer(fd, size)
	if err != nil || addr(byFD) != addr(own) {
		t.Fatalf("by descriptor: %v, same mapping %v", err, err == nil && addr(byFD) == addr(own))
	}
	byName := s.named("seg-a", size)
	if byName == nil || addr(byName) != addr(own) || s.named("seg-a", size*2) != nil || s.named("seg-b", size) != nil {
		t.Fatal("by name: wrong mapping, or one of another size or name")
	}
	own[5] = 42
	if byName[5] != 42 {
		t.Fatal("not the same memory")
	}
	for i, b := range [][]byte{own, byFD} {
		if err := s.unmap(b); err != nil || s.byName["seg-a"] == nil {
			t.Fatalf("unmap %d: %v; the mapping must stay while referenced", i, err)
		}
	}
	if err := s.unmap(byName); err != nil || len(s.byName)+len(s.byKey)+len(s.byAddr) != 0 {
		t.Fatalf("last unmap: %v, %d %d %d left", err, len(s.byName), len(s.byKey), len(s.byAddr))
	}
	// not in the table: unmapped at once
	b, err := MapSegment(fd, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.unmap(b); err != nil {
		t.Fatal(err)
	}
}
