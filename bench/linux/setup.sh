#!/bin/bash
# Called by sender_side.sh: builds the two namespaces, the veth pair and the HTB shaper.
# usage: SND=ns RCV=ns setup.sh offloads(on|off|segs1) qdisc(fifo|age)
# (segs1: offloads off and `gso_max_segs 1` on the sender's veth: one MSS per buffer.)
# The sender's veth is $DEV0 in $SND, the receiver's $DEV1 in $RCV (run-unique names, so
# traces can select them).
set -e
: "${SND:?}" "${RCV:?}" "${DEV0:?}" "${DEV1:?}"
ip netns del "$SND" 2>/dev/null || true; ip netns del "$RCV" 2>/dev/null || true
ip netns add "$SND"; ip netns add "$RCV"
ip link add "$DEV0" netns "$SND" type veth peer name "$DEV1" netns "$RCV"
ip -n "$SND" addr add 10.0.0.1/24 dev "$DEV0"; ip -n "$RCV" addr add 10.0.0.2/24 dev "$DEV1"
ip -n "$SND" link set "$DEV0" up; ip -n "$RCV" link set "$DEV1" up; ip -n "$SND" link set lo up; ip -n "$RCV" link set lo up
if [ "${1:-off}" != on ]; then
  ip netns exec "$SND" ethtool -K "$DEV0" tso off gso off gro off >/dev/null 2>&1 || true
  ip netns exec "$RCV" ethtool -K "$DEV1" tso off gso off gro off >/dev/null 2>&1 || true
fi
if [ "${1:-off}" = segs1 ]; then
  ip -n "$SND" link set dev "$DEV0" gso_max_segs 1
fi
T="ip netns exec $SND tc"
$T qdisc add dev "$DEV0" root handle 1: htb default 1 r2q 1000
if [ "${2:-fifo}" = fifo ]; then
  $T class add dev "$DEV0" parent 1: classid 1:1 htb rate 100mbit
  $T qdisc add dev "$DEV0" parent 1:1 handle 10: pfifo_fast
else
  # 2LPS: strict priority between two HTB leaves under one 100 Mbit/s parent;
  # nft moves a connection to the low-priority leaf once conntrack has counted 633 kB.
  $T class add dev "$DEV0" parent 1: classid 1:1 htb rate 100mbit
  $T class add dev "$DEV0" parent 1:1 classid 1:10 htb rate 1mbit ceil 100mbit prio 0
  $T class add dev "$DEV0" parent 1:1 classid 1:20 htb rate 1mbit ceil 100mbit prio 1
  $T qdisc add dev "$DEV0" parent 1:10 handle 10: pfifo_fast
  $T qdisc add dev "$DEV0" parent 1:20 handle 20: pfifo_fast
  ip netns exec "$SND" sysctl -qw net.netfilter.nf_conntrack_acct=1 || true
  ip netns exec "$SND" nft -f - <<'NFT'
table inet age {
  chain post { type filter hook postrouting priority 0;
    ct original bytes > 633000 meta priority set 1:20 accept
    meta priority set 1:10
  }
}
NFT
fi
