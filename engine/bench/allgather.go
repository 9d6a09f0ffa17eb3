package bench

import (
	"io"
	"sort"
	"time"

	"github.com/luacoll/luacoll/window"
)

// ScheduleStageMax is the largest chunk (bytes per rank) a schedule is
// given room to stage, as the built-in all-gather stages small ones: the
// extra copy costs little there, and saves the barrier.
const ScheduleStageMax = 16 << 10

// AGBenchConfig configures BenchAllGather.
type AGBenchConfig struct {
	// Sizes are total output bytes (nccl-tests convention); each rank
	// sends Size/N bytes, rounded down to a multiple of 16.
	Sizes  []uint64
	Iters  int
	Warmup int
	Algo   string // "auto", "direct", "ring" or "hier"
	Graph  bool   // luacoll in graph mode; NCCL is then also captured
	NCCL   bool   // measure ncclAllGather on the same buffers (CUDA only)
	// NCCLSym measures ncclAllGather on buffers NCCL allocates and
	// registers as a symmetric window (ncclMemAlloc,
	// ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), where NCCL
	// runs its symmetric kernels; the result is copied into the window to
	// be checked. CUDA only, NCCL 2.27 and later.
	NCCLSym bool
	Path    string // window path: "auto" (default: per exec by size), "ce" or "sm"
	// MPI measures MPI_Allgather (Open MPI's libmpi, loaded at run time)
	// on the same buffers in the same processes; the ranks must have been
	// started by Open MPI's mpirun (host backend only).
	MPI bool
	// Stress adds, after the timed execs of each size, Iters execs with
	// new data every time, each checked, with random host delays of up
	// to 200 us on rank 1 before half of them.
	Stress bool
	// Schedule, when set, replaces the built-in all-gather: it is called
	// for every exec (a schedule written in Lua, say); ScheduleName names it.
	// staging, when not 0, is the offset in w of 2 * ranks * n bytes the
	// schedule may stage chunks in instead of starting with a barrier (up
	// to ScheduleStageMax bytes per rank); a call reports how many
	// all-gathers it made (a plan of a staged schedule holds two).
	Schedule     func(w *window.Window, src *window.Buffer, n, staging uint64) (int, error)
	ScheduleName string
	// Builtin, with a Schedule, also measures the built-in direct
	// all-gather (eager) on the same window and buffers in the same run.
	Builtin bool
	// BuiltinGraph runs that built-in baseline in graph mode (beside a
	// plan replayed as a graph).
	BuiltinGraph bool
	// InPlace runs every exec in place (nccl-tests' in-place column): each
	// rank's chunk already sits in the window at rank*n, so the own copy
	// is skipped; NCCL, when measured, gets the same in-place buffers.
	InPlace bool
	// Rounds, above 1, measures each size (and MPI_Allgather, when asked
	// for) that many times, in turn, and reports the medians; #wrong sums
	// the rounds.
	Rounds int
	// Progress, when set, receives a progress line per size (rank 0).
	Progress io.Writer
	// OnRow, when set, is called on rank 0 with each size's row as soon
	// as it is measured (the progress line off meanwhile); res holds the
	// rows so far and Info as it stands. An error from it ends the run.
	OnRow func(res *AGBenchResult, row AGBenchRow) error
}

// AGBenchRow is one size of the all-gather benchmark. Seconds are the
// average per exec over Iters execs enqueued back to back (nccl-tests
// "time"); algbw = Bytes/Seconds, busbw = algbw*(n-1)/n, in GB/s.
type AGBenchRow struct {
	Bytes     uint64  `json:"size"`
	Count     uint64  `json:"count"`
	Type      string  `json:"type"`
	Seconds   float64 `json:"time_s"`
	AlgBW     float64 `json:"algbw_gbps"`
	BusBW     float64 `json:"busbw_gbps"`
	Wrong     int     `json:"wrong"`
	NCCLSec   float64 `json:"nccl_time_s,omitempty"`
	NCCLBusBW float64 `json:"nccl_busbw_gbps,omitempty"`
	NCCLWrong int     `json:"nccl_wrong,omitempty"`
	// Ratio is time_nccl / time_ours (above 1: luacoll is faster).
	Ratio float64 `json:"ratio_vs_nccl,omitempty"`
	// NCCL on registered symmetric buffers (AGBenchConfig.NCCLSym).
	NCCLSymSec   float64 `json:"nccl_sym_time_s,omitempty"`
	NCCLSymBusBW float64 `json:"nccl_sym_busbw_gbps,omitempty"`
	NCCLSymWrong int     `json:"nccl_sym_wrong,omitempty"`
	RatioSym     float64 `json:"ratio_vs_nccl_sym,omitempty"`
	// Protocol is how the built-in all-gather moved this size's data
	// (Persistent.Protocol).
	Protocol string `json:"protocol,omitempty"`
	// PredictedSec is the cost model's time per exec of a plan schedule
	// (bench allgather --plan; 0: no prediction).
	PredictedSec float64 `json:"predicted_time_s,omitempty"`
	// PlanMode is the mode the size's plans replayed in (bench allgather
	// --plan: "host", "device", "stream" or "graph").
	PlanMode string `json:"plan_mode,omitempty"`
	// The built-in direct all-gather beside a schedule (AGBenchConfig.
	// Builtin); BuiltinRatio is time_builtin / time_schedule.
	BuiltinSec   float64 `json:"builtin_time_s,omitempty"`
	BuiltinBusBW float64 `json:"builtin_busbw_gbps,omitempty"`
	BuiltinWrong int     `json:"builtin_wrong,omitempty"`
	BuiltinRatio float64 `json:"ratio_vs_builtin,omitempty"`
	// MPI_Allgather on the same buffers (AGBenchConfig.MPI); MPIRatio is
	// time_mpi / time_ours (above 1: luacoll is faster).
	MPISec   float64 `json:"mpi_time_s,omitempty"`
	MPIBusBW float64 `json:"mpi_busbw_gbps,omitempty"`
	MPIWrong int     `json:"mpi_wrong,omitempty"`
	MPIRatio float64 `json:"ratio_vs_mpi,omitempty"`
}

// AGBenchResult is what rank 0 reports.
type AGBenchResult struct {
	Rows []AGBenchRow
	// Info is the all-gather's ag:info() after the run.
	Info map[string]any
	// NCCL is the library version, or why there is no baseline.
	NCCL     string
	HaveNCCL bool
	// NCCLNodes are the node counts of NCCL's captured graph (graph mode).
	NCCLNodes string
	// NCCLSym says how the symmetric NCCL baseline ran, or why there is
	// none; HaveNCCLSym: the rows hold its figures.
	NCCLSym     string
	HaveNCCLSym bool
	// HaveBuiltin: the rows hold the built-in all-gather's figures too.
	HaveBuiltin bool
	// MPI is the library's version, or why there is no MPI baseline.
	MPI     string
	HaveMPI bool
}

// AGChunkAlign is the granularity of an all-gather bench's chunk: each
// rank sends a multiple of it (its share of the total, rounded down).
const AGChunkAlign = 16

// AGChunk is the chunk each of n ranks sends for a total size: total/n
// rounded down to AGChunkAlign (0 when total is below n*AGChunkAlign).
func AGChunk(total, n uint64) uint64 { return total / n &^ (AGChunkAlign - 1) }

// hostSettle is how long a host rank keeps its processor busy before its
// warm-up execs.
//
// While a Go process is idle (as in the bootstrap's barrier, a socket
// read) the runtime's monitor thread sleeps; the first system call after
// wakes it, and it then looks at the process every 20 us (60-100 us on a
// 2-core VM) for 50 rounds before it backs off, doubling its sleep up to
// 10 ms. Each look takes a processor for a moment, and when every rank
// has one processor to itself that is a rank's: 2 ranks at 1 KiB, a
// 20-exec run right after the barrier lost 15-40 us to one such look in
// about one run of four, 1-2 us an exec on average. After 20 ms of work
// the looks are milliseconds apart. The warm-up execs come after the
// spin because the first exec after it took 4-12 us.
const hostSettle = 20 * time.Millisecond

// settleHost spins for hostSettle (see there).
func settleHost() {
	for end := time.Now().Add(hostSettle); time.Now().Before(end); {
	}
}

// medianOf returns the median of xs (the upper one of an even count).
func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
