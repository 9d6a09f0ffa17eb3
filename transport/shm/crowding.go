package shm

import "github.com/luacoll/luacoll/transport"

// SetOversubscribed implements transport.Crowdable (Oversubscribed).
func (b *HostBackend) SetOversubscribed(on bool) { b.Oversubscribed = on }

// SetSharedProcess implements transport.Crowdable (SharedProcess).
func (b *HostBackend) SetSharedProcess(on bool) { b.SharedProcess = on }

var _ transport.Crowdable = (*HostBackend)(nil)
