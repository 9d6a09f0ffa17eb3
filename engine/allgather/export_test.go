package allgather

// AgHostEagerMax is agHostEagerMax, for the external tests.
const AgHostEagerMax = agHostEagerMax

// SetExecCount sets the execs an all-gather counts so far, so that a test
// reaches the tag's wrap without 2^23 execs.
func SetExecCount(ag *Persistent, k uint64) { ag.k = k }

// TagExecMask is the largest exec field of a tag before it wraps.
const TagExecMask = tagKMask

// HierPieces and HierPiece are agHierPieces and agPiece.
var HierPieces, HierPiece = agHierPieces, agPiece

// HostEagerMax is the largest n per rank the host protocol of ag stages.
func HostEagerMax(ag *Persistent) uint64 { return ag.host.eagerMax }
