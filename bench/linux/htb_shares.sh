#!/usr/bin/env bash
# HTB against the machine's kernel (issue 36): the 30/70 tree of
# experiments/examples/htb-linux.toml applied with tc on a router namespace, two bulk TCP
# flows (one per class) and a UDP echo probe in class 1:10; prints each class's rate (bytes
# the receiver read over the measured window), the probe's RTT percentiles, and tc's own
# class counters.
#
#   sudo bench/linux/htb_shares.sh          # 12 s: 2 s warm-up, 10 s measured
#   sudo bench/linux/htb_shares.sh idle     # only class 1:10 loaded: it reaches its ceil
#   SS=1 sudo bench/linux/htb_shares.sh     # also the senders' `ss -tin` mid-run
#
# snd (10.0.1.1) -- rtr (10.0.1.2 | 10.0.2.1) -- rcv (10.0.2.2): veth pairs, one MSS per buffer,
# HTB on rtr's egress towards rcv: 1:1 100 Mbit/s; 1:10 rate 30 ceil 100, 1:20 rate 70
# ceil 100, each with pfifo limit 100 (this kernel has no fq_codel); ports 5001 and 5003
# (the probe) -> 1:10, port 5002 -> 1:20 (u32 filters). The load is the project's own: python3 TCP
# senders (CUBIC, set per socket) and a reader per port. Needs root, iproute2,
# python3. Namespaces and devices are named sjh<random>-*, per run, and
# removed on every exit path. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-both}
case "$mode" in both|idle) ;; *) echo "htb_shares.sh: mode must be both or idle, got '$mode'" >&2; exit 2;; esac
. ./router3.sh sjh
# The tree, as `sojourn deploy plan` writes it for the experiment (plus port filters).
T="ip netns exec $RTR tc"
D="${id}c"
$T qdisc replace dev "$D" root handle 1: htb default 20 r2q 10 direct_qlen 1000
$T class replace dev "$D" parent 1: classid 1:1 htb rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b prio 0
$T class replace dev "$D" parent 1:1 classid 1:10 htb rate 30Mbit ceil 100Mbit burst 1600b cburst 1600b prio 0
$T class replace dev "$D" parent 1:1 classid 1:20 htb rate 70Mbit ceil 100Mbit burst 1600b cburst 1600b prio 0
$T qdisc replace dev "$D" parent 1:10 handle 2: pfifo limit 100
$T qdisc replace dev "$D" parent 1:20 handle 3: pfifo limit 100
$T filter add dev "$D" parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10
$T filter add dev "$D" parent 1: protocol ip prio 1 u32 match ip dport 5003 0xffff flowid 1:10
$T filter add dev "$D" parent 1: protocol ip prio 1 u32 match ip dport 5002 0xffff flowid 1:20

cat >"$tmp/rx.py" <<'PY'
import selectors, socket, sys, time
warm, meas = float(sys.argv[1]), float(sys.argv[2])
sel = selectors.DefaultSelector()
for port in (5001, 5002):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(4); s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, ("listen", port))
got = {5001: 0, 5002: 0}
t0 = None
while True:
    for key, _ in sel.select(0.05):
        kind, port = key.data
        if kind == "listen":
            c, _ = key.fileobj.accept(); c.setblocking(False)
            sel.register(c, selectors.EVENT_READ, ("data", port))
            t0 = t0 or time.monotonic()
        else:
            n = len(key.fileobj.recv(1 << 20) or b"")
            now = time.monotonic()
            if t0 and warm <= now - t0 < warm + meas:
                got[port] += n
    if t0 and time.monotonic() - t0 >= warm + meas:
        break
print(f"{got[5001]} {got[5002]}")
PY
cat >"$tmp/tx.py" <<'PY'
import socket, sys, threading, time
dur = float(sys.argv[1]); ports = [int(p) for p in sys.argv[2:]]
buf = b"x" * 65536
def run(port):
    s = socket.socket()
    # CUBIC, as the experiment file (this machine's default is BBR, and a namespace may
    # not change the default: the socket option, with CAP_NET_ADMIN, may).
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
    s.connect(("10.0.2.2", port))
    end = time.monotonic() + dur
    try:
        while time.monotonic() < end:
            s.send(buf)
    except OSError:
        pass  # the reader closed first: the measured window is over
    s.close()
ts = [threading.Thread(target=run, args=(p,)) for p in ports]
[t.start() for t in ts]; [t.join() for t in ts]
PY
cat >"$tmp/echo.py" <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 5003))
while True:
    d, a = s.recvfrom(2048); s.sendto(d, a)
PY
cat >"$tmp/probe.py" <<'PY'
import socket, struct, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.0)
for i in range(n):
    t = time.monotonic()
    s.sendto(struct.pack("!d", t) + b"p" * 56, ("10.0.2.2", 5003))
    try:
        d, _ = s.recvfrom(2048)
        print(f"{(time.monotonic() - struct.unpack('!d', d[:8])[0]) * 1e3:.3f}")
    except socket.timeout:
        pass
    time.sleep(max(0.0, 0.05 - (time.monotonic() - t)))
PY
warm=2; meas=10
ip netns exec "$RCV" python3 "$tmp/echo.py" & pids+=($!)
ip netns exec "$RCV" python3 "$tmp/rx.py" $warm $meas >"$tmp/rx.out" & pids+=($!)
sleep 0.5
ports="5001 5002"; [ "$mode" = idle ] && ports=5001
ip netns exec "$SND" python3 "$tmp/tx.py" $((warm + meas + 8)) $ports & pids+=($!)
sleep $warm
snap() {  # "time_s bytes(1:10) bytes(1:20)" from tc's class counters (wire bytes)
  echo "$(date +%s.%N) $(ip netns exec "$RTR" tc -s class show dev "$D" | awk '
    /^class htb 1:10 /{c=10} /^class htb 1:20 /{c=20} /^class htb 1:1 /{c=0}
    /Sent/{ if (c==10) a=$2; if (c==20) b=$2 } END { print a, b }')"
}
snap >"$tmp/snap0"
if [ -n "${SS:-}" ]; then (sleep 5; ip netns exec "$SND" ss -tin >&2) & fi
ip netns exec "$SND" python3 "$tmp/probe.py" $((meas * 20 - 10)) >"$tmp/rtt" || true
snap >"$tmp/snap1"
wait "${pids[1]}" || true
read -r b10 b20 <"$tmp/rx.out"
python3 - "$b10" "$b20" "$meas" "$mode" "$tmp/rtt" "$tmp/snap0" "$tmp/snap1" <<'PY'
import statistics, sys
b10, b20, meas, mode = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rtt = sorted(float(x) for x in open(sys.argv[5]) if x.strip())
s0 = [float(x) for x in open(sys.argv[6]).read().split()]
s1 = [float(x) for x in open(sys.argv[7]).read().split()]
dt = s1[0] - s0[0]
w10, w20 = (s1[1] - s0[1]) * 8 / dt / 1e6, (s1[2] - s0[2]) * 8 / dt / 1e6
print(f"mode={mode} wire (tc class counters over {dt:.1f} s): 1:10 {w10:.2f} Mbit/s, 1:20 {w20:.2f} Mbit/s, "
      f"total {w10 + w20:.2f}; share of 1:10 {w10 / (w10 + w20) * 100:.1f} %")
r10, r20 = b10 * 8 / meas / 1e6, b20 * 8 / meas / 1e6
print(f"mode={mode} class 1:10 {r10:.2f} Mbit/s, class 1:20 {r20:.2f} Mbit/s, total {r10 + r20:.2f} "
      f"(TCP payload read by the receiver)")
if rtt:
    q = lambda p: rtt[min(len(rtt) - 1, int(p * len(rtt)))]
    print(f"probe (UDP echo in 1:10) RTT ms: p10 {q(0.1):.2f} median {statistics.median(rtt):.2f} p90 {q(0.9):.2f} (n={len(rtt)})")
PY
ip netns exec "$RTR" tc -s class show dev "$D" | sed -n '/^class/p;/Sent/p'
