// Package engine is a rank's world: the launcher that starts the ranks of a
// job, the environment that tells a rank where it sits, and the TCP
// bootstrap through which the ranks meet, exchange small messages and learn
// that a peer failed.
package engine
