package transport

// GPUSharer is a backend told whether another rank of the job uses its
// GPU (the same host and device), once the topology is known: ranks that
// share one are time-sliced, which changes how the backend should run.
type GPUSharer interface {
	SetGPUShared(shared bool)
}

// Crowdable is a backend whose waits run on the rank's own CPUs (the host
// backend's): told that the job's ranks outnumber the CPUs they may run on
// (oversubscribed), or that other ranks run in this process
// (sharedProcess), the waits of the streams it makes next yield sooner.
type Crowdable interface {
	SetOversubscribed(on bool)
	SetSharedProcess(on bool)
}
