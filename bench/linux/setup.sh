#!/bin/bash
# Called by sender_side.sh: builds the two namespaces, the veth pair and the HTB shaper.
# usage: setup.sh offloads(on|off) qdisc(fifo|age)
set -e
ip netns del snd 2>/dev/null || true; ip netns del rcv 2>/dev/null || true
ip netns add snd; ip netns add rcv
ip link add v0 netns snd type veth peer name v1 netns rcv
ip -n snd addr add 10.0.0.1/24 dev v0; ip -n rcv addr add 10.0.0.2/24 dev v1
ip -n snd link set v0 up; ip -n rcv link set v1 up; ip -n snd link set lo up; ip -n rcv link set lo up
if [ "${1:-off}" = off ]; then
  ip netns exec snd ethtool -K v0 tso off gso off gro off >/dev/null 2>&1 || true
  ip netns exec rcv ethtool -K v1 tso off gso off gro off >/dev/null 2>&1 || true
fi
T="ip netns exec snd tc"
$T qdisc add dev v0 root handle 1: htb default 1 r2q 1000
if [ "${2:-fifo}" = fifo ]; then
  $T class add dev v0 parent 1: classid 1:1 htb rate 100mbit
  $T qdisc add dev v0 parent 1:1 handle 10: pfifo_fast
else
  # 2LPS: strict priority between two HTB leaves under one 100 Mbit/s parent;
  # nft moves a connection to the low-priority leaf once conntrack has counted 633 kB.
  $T class add dev v0 parent 1: classid 1:1 htb rate 100mbit
  $T class add dev v0 parent 1:1 classid 1:10 htb rate 1mbit ceil 100mbit prio 0
  $T class add dev v0 parent 1:1 classid 1:20 htb rate 1mbit ceil 100mbit prio 1
  $T qdisc add dev v0 parent 1:10 handle 10: pfifo_fast
  $T qdisc add dev v0 parent 1:20 handle 20: pfifo_fast
  ip netns exec snd sysctl -qw net.netfilter.nf_conntrack_acct=1 || true
  ip netns exec snd nft -f - <<'NFT'
table inet age {
  chain post { type filter hook postrouting priority 0;
    ct original bytes > 633000 meta priority set 1:20 accept
    meta priority set 1:10
  }
}
NFT
fi
