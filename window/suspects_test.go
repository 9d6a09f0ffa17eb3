package window

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// TestTimeoutNamesTheRankThatHeldItUp: of three ranks, rank 2 never
// reaches the barrier; the others' timeouts name it (and only it).
func TestTimeoutNamesTheRankThatHeldItUp(t *testing.T) {
	job(t, 3, func(r *Rank) error {
		ctx := context.Background()
		o := opts(64)
		o.Timeout = 200 * time.Millisecond
		w, err := r.NewWindow(ctx, o)
		if err != nil {
			return err
		}
		defer w.Release()
		if r.ID() == 2 {
			// Wait until the others timed out, then leave.
			_ = w.WaitSignal(0, transport.CmpGe, 2)
			_ = w.Sync(ctx)
			return r.Ex.Barrier(ctx)
		}
		_ = w.Barrier(0)
		err = w.Sync(ctx)
		var we *WaitError
		want := fmt.Sprintf("slots by peer: rank %d: 1, rank 2: 0; held up by rank 2 (", 1-r.ID())
		if r.ID() == 1 {
			want = "slots by peer: rank 2: 0, rank 0: 1; held up by rank 2 ("
		}
		if !errors.As(err, &we) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("error %v lacks %q", err, want)
		}
		_ = w.Signal(2, Sig{ID: 0, Value: 1})
		if err := w.Sync(ctx); err != nil {
			return err
		}
		return r.Ex.Barrier(ctx)
	})
}
