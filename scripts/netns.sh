#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces joined by a veth pair, each
# node run with a private /dev/shm and its own hostname, so that luacoll's
# ranks in different nodes share nothing but the network. Needs root (or
# CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 and util-linux.
#
#   scripts/netns.sh up NAME              # namespaces NAME-0 (10.231.7.1) and NAME-1 (10.231.7.2)
#   scripts/netns.sh node NAME K CMD...   # run CMD in node K (private /dev/shm, hostname NAME-K);
#                                         #   $LC_NODE_ADDR is the node's address, $LC_NODE_DEV its device
#   scripts/netns.sh down NAME            # remove both (and everything left in them)
# LC_SHM_SIZE sets the size of each node's /dev/shm (default 2g).
#
# NAME is at most 8 characters (device names are NAME-v0, NAME-v1).
set -euo pipefail

usage() { sed -n '2,12p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 name=$2
shift 2
[ ${#name} -le 8 ] || { echo "netns.sh: name $name is longer than 8 characters" >&2; exit 2; }
addr() { echo "10.231.7.$(($1 + 1))"; }

case $cmd in
up)
  ip netns add "$name-0"
  if ! ip netns add "$name-1"; then ip netns del "$name-0"; exit 1; fi
  if ! ip link add "$name-v0" netns "$name-0" type veth peer name "$name-v1" netns "$name-1"; then
    ip netns del "$name-0"; ip netns del "$name-1"; exit 1
  fi
  for k in 0 1; do
    ip -n "$name-$k" addr add "$(addr $k)/24" dev "$name-v$k"
    ip -n "$name-$k" link set "$name-v$k" up
    ip -n "$name-$k" link set lo up
  done
  # Wait for the carrier: UCX skips devices that are not running yet.
  for _ in $(seq 100); do
    if ip -n "$name-0" link show "$name-v0" | grep -q LOWER_UP && ip -n "$name-1" link show "$name-v1" | grep -q LOWER_UP; then
      exit 0
    fi
    sleep 0.05
  done
  echo "netns.sh: the veth pair of $name never came up" >&2
  exit 1
  ;;
node)
  [ $# -ge 2 ] || usage
  k=$1
  shift
  export LC_NODE_ADDR LC_NODE_DEV
  LC_NODE_ADDR=$(addr "$k") LC_NODE_DEV="$name-v$k"
  exec ip netns exec "$name-$k" unshare --mount --uts --propagation private \
    sh -c 'mount -t tmpfs -o size=${LC_SHM_SIZE:-2g},mode=1777 lcshm /dev/shm && hostname "$0" && exec "$@"' "$name-$k" "$@"
  ;;
down)
  for k in 0 1; do
    if ip netns pids "$name-$k" >/dev/null 2>&1; then
      for p in $(ip netns pids "$name-$k"); do kill -9 "$p" 2>/dev/null || true; done
      ip netns del "$name-$k" 2>/dev/null || true
    fi
  done
  ;;
*) usage ;;
esac
