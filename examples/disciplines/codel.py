"""CoDel (RFC 8289) in Python, as Linux's sch_codel computes it: the control law's
1/sqrt(count) in 16-bit fixed point refreshed by one integer Newton step per change of
count (Linux `codel_Newton_step`), the next drop scheduled from the previous one, the
re-entry heuristic within 16 intervals, "above target" only with more than one MTU queued.

It makes the same decisions as the built-in `codel` on a recorded trace of a real run
(tests/python/test_python_disciplines.py replays one through sojourn.testing.compare).

    qdisc = { kind = "python", module = "codel.py", class = "CoDel", target = "5ms", ecn = true }
"""
from collections import deque

from sojourn.units import parse_seconds

REC_INV_SQRT_ONE = 0xFFFF  # 1/sqrt(1) in Q0.16
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1


def _ns(v):
    """A duration as integer ns: "5ms" (the engine's units) or a number of ns."""
    return v if isinstance(v, int) else round(parse_seconds(v) * 1e9)


def control_law(t, interval, rec_inv_sqrt):
    """t + interval / sqrt(count), with the Q0.32 reciprocal (`reciprocal_scale`)."""
    return t + ((interval * (rec_inv_sqrt << 16)) >> 32)


class CoDel:
    def __init__(self, rng, limit=1000, target="5ms", interval="100ms", ecn=False, mtu_bytes=1514):
        self.limit, self.target, self.interval = limit, _ns(target), _ns(interval)
        self.ecn, self.mtu = bool(ecn), mtu_bytes
        if self.target <= 0 or self.interval <= 0:
            raise ValueError("target and interval must be positive")
        self.queue = deque()
        self.backlog = 0
        # codel_vars
        self.count = self.lastcount = 0
        self.dropping = False
        self.rec_inv_sqrt = 0
        self.first_above = 0  # 0 = unset
        self.drop_next = 0

    def __len__(self):
        return len(self.queue)

    @property
    def bytes(self):
        # Optional in the contract; the engine checks it against what the queue holds.
        return self.backlog

    def enqueue(self, pkt, now_ns):
        if len(self.queue) >= self.limit:
            return False  # tail drop: "overlimit"
        self.queue.append(pkt)
        self.backlog += pkt.length
        return True

    def _pop(self):
        if not self.queue:
            return None
        p = self.queue.popleft()
        self.backlog -= p.length
        return p

    def _newton_step(self):
        inv = self.rec_inv_sqrt << 16  # Q0.32
        inv2 = (inv * inv) >> 32
        val = ((3 << 32) - self.count * inv2) & U64
        val >>= 2  # headroom for the next multiply
        val = ((val * inv) & U64) >> 31
        self.rec_inv_sqrt = (val >> 16) & 0xFFFF

    def _should_drop(self, p, now):
        if p is None:
            self.first_above = 0
            return False
        sojourn = max(0, now - p.enqueued_at_ns)
        if sojourn < self.target or self.backlog <= self.mtu:
            self.first_above = 0
            return False
        if self.first_above == 0:
            self.first_above = now + self.interval
            return False
        return now > self.first_above

    def dequeue(self, now):
        p = self._pop()
        if p is None:
            self.dropping = False
            self.first_above = 0
            return None
        drop = self._should_drop(p, now)
        if self.dropping:
            if not drop:
                self.dropping = False
            elif now >= self.drop_next:
                while self.dropping and now >= self.drop_next:
                    self.count = (self.count + 1) & U32
                    self._newton_step()
                    if self.ecn and p.mark_ce():
                        self.drop_next = control_law(self.drop_next, self.interval, self.rec_inv_sqrt)
                        break
                    p.drop("aqm")
                    p = self._pop()
                    if not self._should_drop(p, now):
                        self.dropping = False
                    else:
                        self.drop_next = control_law(self.drop_next, self.interval, self.rec_inv_sqrt)
        elif drop:
            if not (self.ecn and p.mark_ce()):
                p.drop("aqm")
                p = self._pop()
                self._should_drop(p, now)  # for first_above only
            self.dropping = True
            delta = (self.count - self.lastcount) & U32
            if delta > 1 and now - self.drop_next < 16 * self.interval:
                self.count = delta
                self._newton_step()
            else:
                self.count = 1
                self.rec_inv_sqrt = REC_INV_SQRT_ONE
            self.lastcount = self.count
            self.drop_next = control_law(now, self.interval, self.rec_inv_sqrt)
        return p
