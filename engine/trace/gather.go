package trace

import (
	"bytes"
	"context"
	"fmt"
	"os"
)

// Under an external launcher (torchrun, Slurm, Open MPI) no luacoll
// launcher merges the parts: each rank writes its part next to the trace
// file, and at a clean end rank 0 collects them over the bootstrap and
// writes the trace. A rank that failed keeps its part file.

// Mailer is the point-to-point part of the bootstrap.
type Mailer interface {
	Send(ctx context.Context, peer int, tag uint32, data []byte) error
	Recv(ctx context.Context, peer int, tag uint32) ([]byte, error)
}

// gatherTag is the bootstrap tag of trace parts; gatherChunk bounds one
// message (an empty one ends a part).
const (
	gatherTag   = 0x74726163 // "trac"
	gatherChunk = 16 << 20
)

// SidePart is a rank's part file next to the trace file path.
func SidePart(path string, rank int) string { return fmt.Sprintf("%s.rank%d.part", path, rank) }

// Gather ends a trace under an external launcher, once rank's recorder is
// closed: ranks other than 0 send their part to rank 0 and remove it; rank
// 0 merges every part it gets with its own into path. A rank whose part
// did not arrive is named in the error; its file stays where it was made.
func Gather(ctx context.Context, m Mailer, rank, size int, path string) error {
	own := SidePart(path, rank)
	data, err := os.ReadFile(own)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if rank != 0 {
		for off := 0; ; off += gatherChunk {
			chunk := data[min(off, len(data)):min(off+gatherChunk, len(data))]
			if err := m.Send(ctx, 0, gatherTag, chunk); err != nil {
				return fmt.Errorf("trace: sending rank %d's part to rank 0 (it stays in %s): %w", rank, own, err)
			}
			if len(chunk) == 0 {
				break
			}
		}
		return os.Remove(own)
	}
	p, err := ReadPart(bytes.NewReader(data), 0)
	if err != nil {
		return err
	}
	parts := []Part{p}
	var lost []int
	for r := 1; r < size; r++ {
		var buf []byte
		var rerr error
		for {
			chunk, err := m.Recv(ctx, r, gatherTag)
			if err != nil {
				rerr = err
				break
			}
			if len(chunk) == 0 {
				break
			}
			buf = append(buf, chunk...)
		}
		if rerr != nil {
			lost = append(lost, r)
			continue
		}
		p, err := ReadPart(bytes.NewReader(buf), r)
		if err != nil {
			return err
		}
		parts = append(parts, p)
	}
	if _, err := WriteFile(path, parts, nil); err != nil {
		return err
	}
	_ = os.Remove(own)
	if len(lost) > 0 {
		return fmt.Errorf("trace: %s lacks the events of ranks %v: each rank's part stays in %s on its host", path, lost, path+".rankN.part")
	}
	return nil
}
