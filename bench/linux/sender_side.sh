#!/usr/bin/env bash
# Ground truth for sojourn's sender-side model (issue 8), measured on the real kernel.
#
# One CUBIC bulk flow from namespace `snd` to `rcv` over a veth pair, shaped by HTB at
# 100 Mbit/s with pfifo_fast (or a 2-level age-based scheduler) under it; 2 s in, a
# 500-kB transfer starts; prints its FCT and the bulk flow's qdisc backlog, cwnd and RTT.
#
#   sudo bench/linux/sender_side.sh off fifo 4     # offloads off, FIFO, 4 runs
#   sudo bench/linux/sender_side.sh on age 3       # offloads on, age-based (2LPS 633 kB)
#   sudo bench/linux/sender_side.sh segs1 fifo 3   # offloads off, gso_max_segs 1 (issue 18 §2)
#
# With RX_RT=1 the receiving application runs at real-time priority (reads without the
# wake-up delays of a loaded machine; bounded: the run lasts ~3 s).
# With TRACE=FILE it records ack_trace.bt into FILE.<run> (bpftrace).
# With TIMELINE=1 it also prints the bulk flow's samples every 100 ms (t, qdisc backlog
# bytes/packets, cwnd, unacked, RTT, skmem t = sk_wmem_alloc, pacing rate).
# Needs root, iproute2, ethtool, nftables (age only), python3. The namespaces are named
# sjs<random>-snd/-rcv, per run, and removed on every exit path. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")"
for tool in ip tc ethtool python3; do
  command -v "$tool" >/dev/null || { echo "sender_side.sh: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "sender_side.sh: needs root (network namespaces)" >&2; exit 2; }
offloads=${1:-off}; qdisc=${2:-fifo}; reps=${3:-4}
case "$offloads" in on|off|segs1) ;; *) echo "sender_side.sh: offloads must be on, off or segs1, got '$offloads'" >&2; exit 2;; esac
id=sjs$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
export SND=$id-snd RCV=$id-rcv DEV0=${id}0 DEV1=${id}1
log=$(mktemp)
rp=
rp= tp=
trap '[ -n "$rp" ] && kill "$rp" 2>/dev/null; [ -n "$tp" ] && kill "$tp" 2>/dev/null; rm -f "$log.bt"; ip netns del "$SND" 2>/dev/null || true; ip netns del "$RCV" 2>/dev/null || true; rm -f "$log"' EXIT INT TERM
for i in $(seq 1 "$reps"); do
  ./setup.sh "$offloads" "$qdisc" >/dev/null 2>&1
  tp=
  if [ -n "${TRACE:-}" ]; then  # bpftrace in a private mount namespace (tracefs mounted there only)
    sed "s/DEV0/$DEV0/; s/DEV1/$DEV1/" ack_trace.bt >"$log.bt"
    unshare --mount --propagation private sh -c \
      'mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; exec bpftrace "$0"' \
      "$log.bt" >"$TRACE.$i" 2>&1 & tp=$!
    for _ in $(seq 1 100); do grep -q Attaching "$TRACE.$i" 2>/dev/null && break; sleep 0.1; done
  fi
  ip netns exec "$RCV" ${RX_RT:+chrt -f 10} python3 receiver.py >"$log" 2>&1 & rp=$!
  sleep 0.3
  out=$(ip netns exec "$SND" python3 sender.py)
  sleep 0.3; kill "$rp" 2>/dev/null || true; wait "$rp" 2>/dev/null || true; rp=
  if [ -n "$tp" ]; then kill "$tp" 2>/dev/null || true; wait "$tp" 2>/dev/null || true; tp=; fi
  python3 - "$out" "$offloads" "$qdisc" "$log" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
short = [l for l in open(sys.argv[4]) if "bytes 500000 " in l][0]
fct_ms = (float(short.split()[-1]) - d["short_start"]) * 1e3
b = d["bulk_before"][-1] if d["bulk_before"] else None
print(f"offloads={sys.argv[2]} qdisc={sys.argv[3]} fct_ms={fct_ms:.1f} "
      f"bulk(backlog_bytes, backlog_buffers, cwnd, rtt_ms)={b}")
import os
if os.environ.get("TIMELINE"):
    for row in d["timeline"]:
        print("  " + " ".join(str(x) for x in row))
    print(d["last_ss"])
PY
done
