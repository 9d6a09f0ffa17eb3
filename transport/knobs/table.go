package knobs

// The registry. Defaults come from the measurements in docs/results/; a
// knob's reader applies the default, the registry only documents it.

// Tuning knobs (at most 12).
var (
	// HostSpin is how long a host wait polls before it yields.
	HostSpin = newMicros(Knob{Name: "LUACOLL_HOST_SPIN_US", Class: Tuning, Default: "1000 (0 for a rank that shares its CPUs)",
		Doc: "how long a host wait polls its slot before it starts yielding its CPU"}, 1e7)
	// HostYield is until when a host wait yields before it sleeps.
	HostYield = newMicros(Knob{Name: "LUACOLL_HOST_YIELD_US", Class: Tuning, Default: "10000",
		Doc: "until when a host wait yields its CPU between polls before it sleeps on its bell"}, 1e7)
	// AGPHostEagerMax is the largest n per rank a host all-gather stages.
	AGPHostEagerMax = newUint(Knob{Name: "LUACOLL_AGP_HOST_EAGER_MAX", Class: Tuning, Default: "16384", Unit: "bytes",
		Doc: "largest n per rank a host all-gather sends through its staging area"}, 0, 1<<30, true)
	// HostCache is the cache size the host backend plans its copies with.
	HostCache = newUint(Knob{Name: "LUACOLL_HOST_CACHE", Class: Tuning, Default: "sysfs's last-level cache of cpu0", Unit: "bytes",
		Doc: "cache size the host backend plans its copies with: puts and copies of up to a quarter of it, and the host all-gather's where its ranks' bytes fit half of it, go through the cache (0: none does)"}, 0, 1<<40, true)
	// AGPNetEagerMax is the largest n per rank an all-gather on window
	// operations stages.
	AGPNetEagerMax = newUint(Knob{Name: "LUACOLL_AGP_NET_EAGER_MAX", Class: Tuning, Default: "65536", Unit: "bytes",
		Doc: "largest n per rank an all-gather with network peers stages, with no guard barrier (0: never)"}, 0, 1<<30, true)
	// SyncSpin is how long a CUDA sync polls before it yields.
	SyncSpin = newMicros(Knob{Name: "LUACOLL_SYNC_SPIN_US", Class: Tuning, Default: "100",
		Doc: "how long a CUDA sync polls its stream in place before it yields its thread"}, 1e6)
	// Prelaunch turns prelaunched fused steps and plan servers on or off.
	Prelaunch = newWord(Knob{Name: "LUACOLL_PRELAUNCH", Class: Tuning, Default: "1 when no other rank shares the GPU, else 0",
		Doc: "kernels waiting on a GPU for the host's next call: prelaunched fused steps, and a plan server for device-mode plan calls; 1 on, 0 off, 2 on and print how many calls used them at the stream's close"}, "0", "1", "2")
	// PutBlocksPerSM is the put kernel's grid per SM.
	PutBlocksPerSM = newUint(Knob{Name: "LUACOLL_PUT_BLOCKS_PER_SM", Class: Tuning, Default: "8", Unit: "blocks",
		Doc: "grid of the put kernel (path sm), per SM of the GPU"}, 1, 32, false)
	// NetLanes is the number of extra UCX workers a rank stripes over.
	NetLanes = newUint(Knob{Name: "LUACOLL_NET_LANES", Class: Tuning, Default: "one per two CPUs the rank may run on, at most 4; none below 2",
		Unit: "workers", Doc: "extra UCX workers a rank stripes large puts to network peers over (0: none)"}, 0, 8, false)
	// NetStripeMin is the smallest put cut into stripes.
	NetStripeMin = newUint(Knob{Name: "LUACOLL_NET_STRIPE_MIN", Class: Tuning, Default: "262144", Unit: "bytes",
		Doc: "smallest put to a network peer cut into stripes over the lanes"}, 4096, 1<<40, true)
	// NetLaneSpin is how long an idle lane drives its worker.
	NetLaneSpin = newMicros(Knob{Name: "LUACOLL_NET_LANE_SPIN_US", Class: Tuning, Default: "0",
		Doc: "how long an idle lane keeps driving its UCX worker before it sleeps"}, 1e6)
	// NetAckWait is how long a flush waits for a peer's acknowledgement.
	NetAckWait = newMicros(Knob{Name: "LUACOLL_NET_ACK_WAIT_US", Class: Tuning, Default: "30",
		Doc: "how long a flush waits for a network peer's own messages to acknowledge its put_signals before it asks"}, 1e5)
)

// Debug knobs (few: each forces a choice or turns an optimisation off).
var (
	// Transport forces peer classes.
	Transport = newWordChecked(Knob{Name: "LUACOLL_TRANSPORT", Class: Debug, Default: "discovery",
		Doc: "force peer classes: net (every other peer) or a list like 1=net,3=shm (* for every other peer)"}, checkTransport)
	// AGPProtocol forces one protocol of the CUDA all-gather.
	AGPProtocol = newWord(Knob{Name: "LUACOLL_AGP_PROTOCOL", Class: Debug, Default: "auto",
		Doc: "force one protocol of the CUDA all-gather (paths auto and sm) on every exec (scripts/bench/ag-crossover.sh)"},
		"auto", "lines", "staged", "kernel", "ce+kernel")
	// AGPTrace makes the CUDA all-gather keep a trace of its phases.
	AGPTrace = newWord(Knob{Name: "LUACOLL_AGP_TRACE", Class: Debug, Default: "0",
		Doc: "1: the CUDA all-gather's ready and done kernels stamp their start and end; destroy prints the phases' medians"}, "0", "1")
	// PlanFuse lets a plan's replays share a launch in stream mode.
	PlanFuse = newWord(Knob{Name: "LUACOLL_PLAN_FUSE", Class: Debug, Default: "1",
		Doc: "0: in stream mode each run of a plan's steps is its own launch (a replay's last run and the next one's first share none)"}, "0", "1")
	// PlanBlocks is the most blocks a device-mode plan spreads over.
	PlanBlocks = newUint(Knob{Name: "LUACOLL_PLAN_BLOCKS", Class: Debug, Default: "8", Unit: "blocks",
		Doc: "the most blocks a device-mode plan spreads over (its widest copy, fill or reduction 64 KiB or more; 128 KiB or more in a plan of 2 ranks): every block runs every step with its share of each copy, fill and reduction, one block for every 8 KiB of the widest; 1: one block"},
		1, 32, false)
	// PlanLines is the largest put_signal of a plan that travels in lines.
	PlanLines = newUint(Knob{Name: "LUACOLL_PLAN_LINES", Class: Debug, Default: "4096 (2 ranks), 1024 (more)", Unit: "bytes",
		Doc: "the largest put_signal of a device-mode plan sent as 16-byte lines of 8 payload bytes and a flag (no release, twice the bytes); 0: none"},
		0, 1<<20, true)
)
