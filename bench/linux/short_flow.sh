#!/usr/bin/env bash
# Ground truth for the short-flow round count (issue 18 §1), measured on the real kernel.
#
# One transfer of SIZE bytes (CUBIC, IW 10) from namespace S to namespace R through a
# user-space delay line in namespace D (10 ms each way: 20 ms RTT; the kernel here has no
# netem) and HTB 100 Mbit/s on D's egress towards R; prints the FCT from connect() and from
# the end of the handshake, and with `trace` a per-ACK trace (bpftrace tcp_probe): every
# data segment at the receiver (`D t seq len`) and every ACK at the sender
# (`A t snd_una cwnd`) and every ACK leaving the receiver (`K t len`), times in ms from the SYN.
#
#   sudo bench/linux/short_flow.sh 100000 5          # 100 kB, 5 runs
#   sudo bench/linux/short_flow.sh 100000 1 trace    # one run with the per-ACK trace
#
# Needs root, iproute2, ethtool, python3 (bpftrace for `trace`). Namespaces and devices are
# named sjf<random>-*, created per run and removed on every exit path. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")"
for tool in ip tc ethtool python3; do
  command -v "$tool" >/dev/null || { echo "short_flow.sh: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "short_flow.sh: needs root (network namespaces)" >&2; exit 2; }
size=${1:-100000}; reps=${2:-3}; trace=${3:-}
[[ "$size" =~ ^[0-9]+$ ]] || { echo "short_flow.sh: SIZE must be bytes, got '$size'" >&2; exit 2; }
id=sjf$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
S=$id-s; D=$id-d; R=$id-r
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in "$S" "$D" "$R"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
port=$((20000 + RANDOM % 20000))
for i in $(seq 1 "$reps"); do
  for n in "$S" "$D" "$R"; do ip netns del "$n" 2>/dev/null || true; ip netns add "$n"; done
  ip link add "${id}a" netns "$S" type veth peer name "${id}b" netns "$D"
  ip link add "${id}c" netns "$D" type veth peer name "${id}d" netns "$R"
  ip -n "$S" addr add 10.9.0.1/24 dev "${id}a"; ip -n "$R" addr add 10.9.0.2/24 dev "${id}d"
  for pair in "$S:${id}a" "$D:${id}b" "$D:${id}c" "$R:${id}d"; do
    ns=${pair%%:*}; dev=${pair#*:}
    ip -n "$ns" link set "$dev" up
    ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off tx off >/dev/null 2>&1 || true
  done
  for n in "$S" "$D" "$R"; do ip -n "$n" link set lo up; done
  # Static neighbours: no ARP round trip through the delay line before the SYN.
  mac() { ip -n "$1" -o link show "$2" | sed -E 's/.*link\/ether ([0-9a-f:]+).*/\1/'; }
  ip -n "$S" neigh replace 10.9.0.2 lladdr "$(mac "$R" "${id}d")" dev "${id}a" nud permanent
  ip -n "$R" neigh replace 10.9.0.1 lladdr "$(mac "$S" "${id}a")" dev "${id}d" nud permanent
  ip netns exec "$S" sysctl -qw net.ipv4.tcp_no_metrics_save=1
  ip netns exec "$D" tc qdisc add dev "${id}c" root handle 1: htb default 1 r2q 1000
  ip netns exec "$D" tc class add dev "${id}c" parent 1: classid 1:1 htb rate 100mbit
  ip netns exec "$D" tc qdisc add dev "${id}c" parent 1:1 handle 10: pfifo limit 1000
  # Real-time priority (bounded: 8 s, mostly asleep) keeps its wake-ups within ~0.1 ms on a
  # loaded machine; plain priority added up to several ms per pass.
  ip netns exec "$D" chrt -f 10 python3 delay_line.py "${id}b" "${id}c" 10 8 >"$tmp/dl" 2>&1 & pids+=($!)
  if [ -n "$trace" ]; then
    sed "s/PORT/$port/g; s/RDEV/${id}d/g" short_trace.bt >"$tmp/t.bt"
    unshare --mount --propagation private sh -c \
      'mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; exec bpftrace "$0"' \
      "$tmp/t.bt" >"$tmp/trace" 2>&1 & pids+=($!)
    for _ in $(seq 1 100); do grep -q Attaching "$tmp/trace" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
  fi
  ip netns exec "$R" python3 short_app.py recv "$port" "$size" >"$tmp/r" 2>&1 & rp=$!; pids+=($rp)
  for _ in $(seq 1 50); do grep -q ready "$tmp/r" 2>/dev/null && grep -q ready "$tmp/dl" && break; sleep 0.1; done
  ip netns exec "$S" python3 short_app.py send "$size" cubic "$port" >"$tmp/s"
  wait "$rp" || true
  sleep 0.3
  [ -n "$trace" ] && { kill "${pids[-2]}" 2>/dev/null || true; wait "${pids[-2]}" 2>/dev/null || true; }
  python3 - "$tmp/s" "$tmp/r" "$size" "${trace:+$tmp/trace}" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
r = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])
assert r["bytes"] == int(sys.argv[3]), r
print(f"size={sys.argv[3]} cc={s['cc']} fct_connect_ms={(r['last'] - s['connect']) * 1e3:.2f} "
      f"fct_first_byte_ms={(r['last'] - s['established']) * 1e3:.2f}")
if len(sys.argv) > 4 and sys.argv[4]:
    t0 = None
    for line in open(sys.argv[4]):
        f = line.split()
        if not f or f[0] not in "DAK" or len(f) < 3:
            continue
        t = int(f[1])
        t0 = t0 if t0 is not None else t
        print(f"  {f[0]} {(t - t0) / 1e6:8.3f} " + " ".join(f[2:]))
PY
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true; pids=()
  for n in "$S" "$D" "$R"; do ip netns del "$n" 2>/dev/null || true; done
done
