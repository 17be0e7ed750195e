#!/usr/bin/env bash
# Ground truth for sojourn's sender-side model (issue 8), measured on the real kernel.
#
# One CUBIC bulk flow from namespace `snd` to `rcv` over a veth pair, shaped by HTB at
# 100 Mbit/s with pfifo_fast (or a 2-level age-based scheduler) under it; 2 s in, a
# 500-kB transfer starts; prints its FCT and the bulk flow's qdisc backlog, cwnd and RTT.
#
#   sudo bench/linux/sender_side.sh off fifo 4     # offloads off, FIFO, 4 runs
#   sudo bench/linux/sender_side.sh on age 3       # offloads on, age-based (2LPS 633 kB)
#
# Needs root, iproute2, ethtool, nftables (age only), python3. Removes the namespaces
# `snd` and `rcv` it creates. Not run in CI (no privileges there).
set -euo pipefail
cd "$(dirname "$0")"
for tool in ip tc ethtool python3; do
  command -v "$tool" >/dev/null || { echo "sender_side.sh: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "sender_side.sh: needs root (network namespaces)" >&2; exit 2; }
offloads=${1:-off}; qdisc=${2:-fifo}; reps=${3:-4}
log=$(mktemp)
trap 'ip netns del snd 2>/dev/null || true; ip netns del rcv 2>/dev/null || true; rm -f "$log"' EXIT
for i in $(seq 1 "$reps"); do
  ./setup.sh "$offloads" "$qdisc" >/dev/null 2>&1
  ip netns exec rcv python3 receiver.py >"$log" 2>&1 & rp=$!
  sleep 0.3
  out=$(ip netns exec snd python3 sender.py)
  sleep 0.3; kill "$rp" 2>/dev/null || true; wait "$rp" 2>/dev/null || true
  python3 - "$out" "$offloads" "$qdisc" "$log" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
short = [l for l in open(sys.argv[4]) if "bytes 500000 " in l][0]
fct_ms = (float(short.split()[-1]) - d["short_start"]) * 1e3
b = d["bulk_before"][-1] if d["bulk_before"] else None
print(f"offloads={sys.argv[2]} qdisc={sys.argv[3]} fct_ms={fct_ms:.1f} "
      f"bulk(backlog_bytes, backlog_buffers, cwnd, rtt_ms)={b}")
PY
done
