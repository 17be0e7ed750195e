# Sourced by htb_shares.sh and htb_oversub.sh (after their arguments are read): checks for
# ip, tc, python3 and root, then the three-namespace bed
#   snd (10.0.1.1) -- rtr (10.0.1.2 | 10.0.2.1) -- rcv (10.0.2.2)
# with run-unique names "$1<random>-snd|rtr|rcv" (devices "<id>a".."<id>d"; rtr's egress
# towards rcv is "<id>c"), one MTU per buffer, forwarding on, and a cleanup trap that kills
# the PIDs in "pids" and removes the namespaces and "$tmp" on every exit path.
for tool in ip tc python3; do
  command -v "$tool" >/dev/null || { echo "${0##*/}: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "${0##*/}: needs root (network namespaces)" >&2; exit 2; }
id=$1$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
SND=$id-snd RTR=$id-rtr RCV=$id-rcv
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for n in "$SND" "$RTR" "$RCV"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 130" INT
trap "exit 143" TERM
for n in "$SND" "$RTR" "$RCV"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip link add "${id}a" netns "$SND" type veth peer name "${id}b" netns "$RTR"
ip link add "${id}c" netns "$RTR" type veth peer name "${id}d" netns "$RCV"
ip -n "$SND" addr add 10.0.1.1/24 dev "${id}a"; ip -n "$RTR" addr add 10.0.1.2/24 dev "${id}b"
ip -n "$RTR" addr add 10.0.2.1/24 dev "${id}c"; ip -n "$RCV" addr add 10.0.2.2/24 dev "${id}d"
for pair in "$SND ${id}a" "$RTR ${id}b" "$RTR ${id}c" "$RCV ${id}d"; do
  set -- $pair
  ip -n "$1" link set "$2" up
  # One MSS per buffer (no GSO super-packets through the router), as the simulator's
  # packets; ethtool, when installed, turns the offloads off as well.
  ip -n "$1" link set dev "$2" gso_max_segs 1
  command -v ethtool >/dev/null && ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 || true
done
ip -n "$SND" route add default via 10.0.1.2; ip -n "$RCV" route add default via 10.0.2.1
ip netns exec "$RTR" sysctl -qw net.ipv4.ip_forward=1
