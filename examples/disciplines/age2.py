"""A 2-level age-based scheduler (2LPS) in Python: a flow's packets go to the high-priority
queue while the flow has sent fewer than `threshold` bytes, to the low-priority queue after;
the high queue is always served first, each queue in FIFO order. Age is counted here, per
flow, in IP bytes of the arrivals (the built-in `age` with `count = "qdisc"` counts alike).
Both queues share one packet limit; a full queue tail-drops the arrival.

    qdisc = { kind = "python", module = "age2.py", class = "TwoLevelAge", threshold = "1MB" }
"""
from collections import deque

from sojourn.units import parse_size


class TwoLevelAge:
    def __init__(self, rng, threshold="1MB", limit=1000):
        self.threshold = threshold if isinstance(threshold, int) else int(parse_size(threshold))
        if self.threshold <= 0:
            raise ValueError("threshold must be positive")
        self.limit = limit
        self.high, self.low = deque(), deque()
        self.sent = {}  # flow -> IP bytes seen so far

    def __len__(self):
        return len(self.high) + len(self.low)

    def enqueue(self, pkt, now_ns):
        if len(self) >= self.limit:
            return False
        age = self.sent.get(pkt.flow, 0)
        self.sent[pkt.flow] = age + pkt.length - 14  # IP bytes: the frame less its Ethernet header
        (self.high if age < self.threshold else self.low).append(pkt)
        return True

    def dequeue(self, now_ns):
        if self.high:
            return self.high.popleft()
        if self.low:
            return self.low.popleft()
        return None
