package transport

import "context"

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

// TimeoutHinter is a backend whose wait timeouts can carry a hint of the
// likely cause (ranks sharing a GPU without MPS, say).
type TimeoutHinter interface {
	SetTimeoutHint(hint string)
}

// HostBufferUser is a backend told to keep its windows' memory in host
// memory its device maps, where the network reads it in place (a GPU
// whose job has network peers: the proxy path).
type HostBufferUser interface {
	UseHostBuffers()
}

// LocalSyncer is a stream that can wait for its operations to complete
// locally (their sources reusable, their waits seen) without waiting for
// network puts to land remotely.
type LocalSyncer interface {
	SyncLocal(ctx context.Context) error
}

var _ LocalSyncer = (*HostStream)(nil)
