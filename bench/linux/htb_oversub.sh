#!/usr/bin/env bash
# HTB oversubscribed with unequal plans, against the machine's kernel (issue 36, docs/isp.md
# "What HTB does with oversubscription"): under a 30 Mbit/s root (rate = ceil), two
# subscriber classes with rate = ceil 20 and 30 Mbit/s and tc's default bursts, each
# offered 40 Mbit/s of UDP (1514-B frames). Prints each class's wire rate from tc's class
# counters over the measured window.
#
#   sudo bench/linux/htb_oversub.sh device   # the device is the bottleneck: a 30 Mbit/s tbf
#                                            # at the root, the HTB tree as its child
#   sudo bench/linux/htb_oversub.sh fast     # the link faster than the tree: a 1 Gbit/s tbf
#   WARM=2 MEAS=10 sudo bench/linux/htb_oversub.sh device
#
# snd (10.0.1.1) -- rtr (10.0.1.2 | 10.0.2.1) -- rcv (10.0.2.2): veth pairs, one MTU per
# buffer. On rtr's egress towards rcv: `tbf rate <device rate>` at the root (the device's
# own rate: a tbf only dequeues its child when it has tokens for the packet, as a link
# that is busy sending does), and under it the tree as `sojourn deploy plan` writes it for
# experiments/isp/oversub-unequal.toml: 1:1 rate = ceil 30 Mbit/s; 1:10 rate = ceil 20, 1:20
# rate = ceil 30 Mbit/s, no burst/cburst given (tc's default: about one MTU on a tickless
# kernel), r2q 10 (both quanta clamped to 200000 B); pfifo leaves; u32 port filters
# (5001 -> 1:10, 5002 -> 1:20). The load is two paced Python UDP senders. Needs root,
# iproute2, python3. Namespaces and devices are named sjo<random>-*, per run, and removed
# on every exit path. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-device}
case "$mode" in
  device) dev_rate=30mbit; dev_burst=${DEV_BURST:-1514b} ;;
  fast) dev_rate=1gbit; dev_burst=15140b ;;
  *) echo "htb_oversub.sh: mode must be device or fast, got '$mode'" >&2; exit 2 ;;
esac
warm=${WARM:-2}; meas=${MEAS:-10}
. ./router3.sh sjo
# The receiver drops the datagrams (no socket): the counters that matter are the router's.
T="ip netns exec $RTR tc"
D="${id}c"
$T qdisc replace dev "$D" root handle 9: tbf rate "$dev_rate" burst "$dev_burst" limit 30000
$T qdisc replace dev "$D" parent 9:1 handle 1: htb default 20 r2q 10 2>"$tmp/tc.err"
$T class replace dev "$D" parent 1: classid 1:1 htb rate 30Mbit ceil 30Mbit 2>>"$tmp/tc.err"
$T class replace dev "$D" parent 1:1 classid 1:10 htb rate 20Mbit ceil 20Mbit 2>>"$tmp/tc.err"
$T class replace dev "$D" parent 1:1 classid 1:20 htb rate 30Mbit ceil 30Mbit 2>>"$tmp/tc.err"
$T qdisc replace dev "$D" parent 1:10 handle 2: pfifo limit 100
$T qdisc replace dev "$D" parent 1:20 handle 3: pfifo limit 100
$T filter add dev "$D" parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10
$T filter add dev "$D" parent 1: protocol ip prio 1 u32 match ip dport 5002 0xffff flowid 1:20
sed 's/^/tc: /' "$tmp/tc.err" >&2
cat >"$tmp/tx.py" <<'PY'
import socket, sys, time
# Each port offered `rate` bit/s of 1472-B datagrams (1514-B frames), paced on a 1-ms grid:
# every tick sends what is due since the start, so a late wake-up catches up.
dur, rate = float(sys.argv[1]), float(sys.argv[2])
ports = [int(p) for p in sys.argv[3:]]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
buf = b"u" * 1472
pps = rate / (1514 * 8)
t0 = time.monotonic(); sent = 0
while True:
    now = time.monotonic() - t0
    if now >= dur:
        break
    due = int(now * pps)
    while sent < due:
        for p in ports:
            try:
                s.sendto(buf, ("10.0.2.2", p))
            except OSError:
                pass  # ENOBUFS on the sender's own device: the offered load is what counts
        sent += 1
    time.sleep(0.001)
PY
ip netns exec "$SND" python3 "$tmp/tx.py" $((warm + meas + 2)) 40e6 5001 5002 & pids+=($!)
snap() {  # "time_s bytes(1:10) bytes(1:20) drops(1:10) drops(1:20)" from tc's class counters
  echo "$(date +%s.%N) $(ip netns exec "$RTR" tc -s class show dev "$D" | awk '
    /^class htb 1:10 /{c=10} /^class htb 1:20 /{c=20} /^class htb 1:1 /{c=0}
    /Sent/{ if (c==10) {a=$2; da=$7} if (c==20) {b=$2; db=$7} } END { print a, b, da+0, db+0 }')"
}
sleep "$warm"
snap >"$tmp/snap0"
sleep "$meas"
snap >"$tmp/snap1"
python3 - "$mode" "$dev_rate" "$tmp/snap0" "$tmp/snap1" <<'PY'
import sys
mode, dev = sys.argv[1], sys.argv[2]
s0 = [float(x) for x in open(sys.argv[3]).read().replace(",", " ").split()]
s1 = [float(x) for x in open(sys.argv[4]).read().replace(",", " ").split()]
dt = s1[0] - s0[0]
w10, w20 = (s1[1] - s0[1]) * 8 / dt / 1e6, (s1[2] - s0[2]) * 8 / dt / 1e6
print(f"mode={mode} device {dev}: wire over {dt:.1f} s (tc class counters): 1:10 (20/20) {w10:.2f} Mbit/s, "
      f"1:20 (30/30) {w20:.2f} Mbit/s, total {w10 + w20:.2f}")
PY
ip netns exec "$RTR" tc -s class show dev "$D" | sed -n '/^class/p;/Sent/p'
