"""A FIFO in Python: Linux's pfifo (tail drop when `limit` packets are queued).

Run on the same file and seed as the built-in `pfifo` with the same limit, it gives
byte-identical outputs (tests/python/test_python_disciplines.py checks it).

    qdisc = { kind = "python", module = "fifo.py", class = "Fifo", limit = 100 }
"""
from collections import deque


class Fifo:
    def __init__(self, rng, limit=1000):
        # rng: sojourn's generator for this link; a FIFO draws nothing from it.
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        self.limit = limit
        self.queue = deque()

    def enqueue(self, pkt, now_ns):
        # sch_fifo: tail drop when qlen >= limit (the engine counts it as "overlimit").
        if len(self.queue) >= self.limit:
            return False
        self.queue.append(pkt)
        return True

    def dequeue(self, now_ns):
        return self.queue.popleft() if self.queue else None

    def __len__(self):
        return len(self.queue)
