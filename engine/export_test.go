package engine

import "github.com/luacoll/luacoll/transport"

// AgHostEagerMax is agHostEagerMax, for the external tests.
const AgHostEagerMax = agHostEagerMax

// SetExecCount sets the execs an all-gather counts so far, so that a test
// reaches the tag's wrap without 2^23 execs.
func SetExecCount(ag *AllGather, k uint64) { ag.k = k }

// TagExecMask is the largest exec field of a tag before it wraps.
const TagExecMask = tagKMask

// NodeGroups is nodeGroups for the external tests: the ranks of each node,
// this rank's node and its index there.
func NodeGroups(topo *transport.Topology, size, me int) ([][]int, int, int, error) {
	l, err := nodeGroups(topo, size, me)
	return l.groups, l.mine, l.li, err
}

// HierPieces and HierPiece are agHierPieces and agPiece.
var HierPieces, HierPiece = agHierPieces, agPiece
