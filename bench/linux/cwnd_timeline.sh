#!/usr/bin/env bash
# CUBIC's window on a long sender-side run, traced in the kernel (issue 40 §4).
#
# The set-up of sender_side.sh segs1 fifo (HTB 100 Mbit/s + pfifo_fast on the sender's veth,
# offloads off, gso_max_segs 1): one CUBIC bulk flow for SECS seconds (default 30) and a UDP
# ping every 0.2 s in the same band, with bpftrace (cwnd_trace.bt) recording every ACK the
# sender processes (cwnd, packets_out, max_packets_out, the is_cwnd_limited latch), every
# data segment and every read at the receiver, and every frame the receiver sends.
# cwnd_timeline.py turns each trace into a timeline and prints the table of the docs.
#
#   sudo bench/linux/cwnd_timeline.sh rt 30 3        # receiver at real-time priority, 3 runs
#   sudo bench/linux/cwnd_timeline.sh normal 30 1    # receiver at normal priority
#
# SNDBUF=BYTES fixes the sender's send buffer (timeline_sender.py).
# OUT=DIR keeps the traces (DIR/trace.<mode>.<run>, DIR/sender.<mode>.<run>.json).
# Needs root, iproute2, ethtool, bpftrace (.ci/system-packages installs it), python3.
# Namespaces sjt<random>-snd/-rcv, removed on every exit path; bpftrace runs in a private
# mount namespace (tracefs mounted there only). Not run in CI.
set -euo pipefail
cd "$(dirname "$0")"
for tool in ip tc ethtool python3 bpftrace; do
  command -v "$tool" >/dev/null || { echo "cwnd_timeline.sh: needs $tool (bash .ci/system-packages)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "cwnd_timeline.sh: needs root (network namespaces, bpftrace)" >&2; exit 2; }
mode=${1:-rt}; secs=${2:-30}; reps=${3:-1}
case "$mode" in rt|normal) ;; *) echo "cwnd_timeline.sh: mode must be rt or normal, got '$mode'" >&2; exit 2;; esac
case "$secs" in ''|*[!0-9]*) echo "cwnd_timeline.sh: seconds must be a whole number, got '$secs'" >&2; exit 2;; esac
[ "$secs" -ge 2 ] && [ "$secs" -le 120 ] || { echo "cwnd_timeline.sh: seconds must be 2..120, got $secs" >&2; exit 2; }
id=sjt$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
export SND=$id-snd RCV=$id-rcv DEV0=${id}0 DEV1=${id}1 SECS=$secs SNDBUF=${SNDBUF:-}
out=${OUT:-$(mktemp -d)}; keep=${OUT:+1}; mkdir -p "$out"
rp= tp=
cleanup() {
  [ -n "$rp" ] && kill "$rp" 2>/dev/null; [ -n "$tp" ] && kill "$tp" 2>/dev/null
  ip netns del "$SND" 2>/dev/null || true; ip netns del "$RCV" 2>/dev/null || true
  [ -z "$keep" ] && rm -rf "$out"; true
}
trap cleanup EXIT; trap "exit 130" INT; trap "exit 143" TERM
for i in $(seq 1 "$reps"); do
  ./setup.sh segs1 fifo >/dev/null 2>&1
  sed "s/DEV1/$DEV1/" cwnd_trace.bt >"$out/trace.bt"
  unshare --mount --propagation private sh -c \
    'mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; exec bpftrace "$0"' \
    "$out/trace.bt" >"$out/trace.$mode.$i" 2>&1 & tp=$!
  for _ in $(seq 1 100); do grep -q Attaching "$out/trace.$mode.$i" 2>/dev/null && break; sleep 0.1; done
  prio=(); [ "$mode" = rt ] && prio=(chrt -f 10)
  ip netns exec "$RCV" "${prio[@]}" timeout $((secs + 20)) python3 timeline_receiver.py & rp=$!
  sleep 0.3
  ip netns exec "$SND" timeout $((secs + 20)) python3 timeline_sender.py >"$out/sender.$mode.$i.json"
  sleep 0.2; kill "$rp" 2>/dev/null || true; wait "$rp" 2>/dev/null || true; rp=
  kill -INT "$tp" 2>/dev/null || true; wait "$tp" 2>/dev/null || true; tp=
  ip netns del "$SND"; ip netns del "$RCV"
  python3 cwnd_timeline.py "$out/trace.$mode.$i" "$out/sender.$mode.$i.json" --label "$mode run $i"
done
