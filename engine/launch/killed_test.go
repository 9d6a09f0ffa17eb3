package launch

import (
	"strings"
	"testing"
)

// A rank killed by a signal nobody in the job sent is reported, with a
// guess for SIGKILL; one the caller says it killed (the REPL's second
// Ctrl-C) is not.
func TestKilledByCallerIsNotReported(t *testing.T) {
	for _, caller := range []bool{false, true} {
		cfg, _, stderr := workerConfig(t, 1, "selfkill")
		if caller {
			cfg.KilledByCaller = func(rank int) bool { return rank == 0 }
		}
		res, _, err := launch(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Ranks[0].Signal == 0 {
			t.Fatalf("rank 0: %+v, want killed", res.Ranks[0])
		}
		noted := strings.Contains(strings.Join(stderr.lines(), ""), "rank 0 was killed by signal 9 (SIGKILL: out of memory?")
		if noted == caller {
			t.Errorf("killed by the caller %v: noted %v\n%s", caller, noted, strings.Join(stderr.lines(), ""))
		}
	}
}
