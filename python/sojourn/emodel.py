"""The ITU-T G.107 E-model (transmission rating R and its MOS) and RFC 3550 jitter, for the
VoIP streams of docs/tests.md.

The E-model adds up impairments on a 0..100 rating scale (G.107 (12/2011) §7.1):
``R = Ro - Is - Id - Ie,eff + A``. With every input at its default (§7.7, Table 2) the
signal-to-noise, simultaneous and echo terms give ``R = 93.2``; sojourn keeps those
defaults and lets the network move only two terms:

* ``Id`` (§7.4): of its three parts, the talker-echo and listener-echo parts (Idte, Idle)
  stay at their default-value contribution (echo perfectly controlled, TELR 65 dB, WEPL
  110 dB), and the absolute-delay part Idd grows with the one-way mouth-to-ear delay Ta:
  nothing up to 100 ms; above it, with ``X = log2(Ta / 100 ms)``,
  ``Idd = 25 * ((1 + X^6)^(1/6) - 3 * (1 + (X/3)^6)^(1/6) + 2)``.
* ``Ie,eff`` (§7.5): a codec's own impairment Ie raised by packet loss: with Ppl the loss
  in percent, BurstR the burst ratio (1 for random loss) and Bpl the codec's robustness to
  loss, ``Ie,eff = Ie + (95 - Ie) * Ppl / (Ppl / BurstR + Bpl)``. Ie and Bpl come from
  ITU-T G.113 Appendix I: G.711 has Ie = 0, and Bpl = 25.1 with packet-loss concealment
  (4.3 without).

``A`` (the advantage factor) is 0 by default. Annex B maps R to a mean opinion score:
``MOS = 1`` for R < 0, ``4.5`` above 100, else ``1 + 0.035 R + R (R - 60)(100 - R) 7e-6``
(R = 93.2 gives 4.41).

Jitter is RFC 3550 §6.4.1's interarrival jitter: for consecutive packets i-1, i with send
times S and arrival times R, ``D = (R_i - R_{i-1}) - (S_i - S_{i-1})`` (the difference of
their transit times) and ``J += (|D| - J) / 16``, a running mean with gain 1/16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

__all__ = ["Codec", "CODECS", "r_factor", "mos_from_r", "idd", "ie_eff", "rfc3550_jitter", "R_DEFAULT"]

#: R with every G.107 input at its default value (§7.7).
R_DEFAULT = 93.2


@dataclass(frozen=True)
class Codec:
    """A voice codec as the VoIP workload sends it and the E-model rates it."""

    name: str
    #: Time between packets (one frame of speech per packet), ns.
    interval_ns: int
    #: RTP payload bytes per packet.
    payload_bytes: int
    #: G.113 Appendix I equipment impairment and packet-loss robustness.
    ie: float
    bpl: float


#: G.711 at 64 kbit/s, 20 ms per packet (160 B), with and without packet-loss concealment.
CODECS = {
    "g711": Codec("g711", 20_000_000, 160, 0.0, 25.1),
    "g711_noplc": Codec("g711_noplc", 20_000_000, 160, 0.0, 4.3),
}


def idd(ta_ms: float) -> float:
    """G.107 §7.4's absolute-delay impairment for a one-way mouth-to-ear delay Ta (ms)."""
    if ta_ms <= 100.0:
        return 0.0
    x = math.log2(ta_ms / 100.0)
    return 25.0 * ((1.0 + x ** 6) ** (1.0 / 6.0) - 3.0 * (1.0 + (x / 3.0) ** 6) ** (1.0 / 6.0) + 2.0)


def ie_eff(loss_percent: float, ie: float, bpl: float, burst_r: float = 1.0) -> float:
    """G.107 §7.5's effective equipment impairment at Ppl = ``loss_percent``."""
    if not 0.0 <= loss_percent <= 100.0:
        raise ValueError(f"loss_percent must be within 0..100, got {loss_percent}")
    return ie + (95.0 - ie) * loss_percent / (loss_percent / burst_r + bpl)


def r_factor(ta_ms: float, loss_percent: float, codec: Codec = CODECS["g711"], advantage: float = 0.0) -> float:
    """R for a mouth-to-ear delay ``ta_ms`` and a packet loss of ``loss_percent`` (random)."""
    return R_DEFAULT - idd(ta_ms) - ie_eff(loss_percent, codec.ie, codec.bpl) + advantage


def mos_from_r(r: float) -> float:
    """G.107 Annex B: the estimated mean opinion score (conversational quality) of R."""
    if r < 0.0:
        return 1.0
    if r > 100.0:
        return 4.5
    return 1.0 + 0.035 * r + r * (r - 60.0) * (100.0 - r) * 7e-6


def rfc3550_jitter(send_ns: Iterable[float], recv_ns: Iterable[float]) -> Optional[float]:
    """RFC 3550 §6.4.1's interarrival jitter (ns) after the last packet of a stream given
    in arrival order; None for fewer than two packets."""
    j = 0.0
    prev: Optional[float] = None
    n = 0
    for s, r in zip(send_ns, recv_ns):
        transit = float(r) - float(s)
        if prev is not None:
            j += (abs(transit - prev) - j) / 16.0
        prev = transit
        n += 1
    return j if n >= 2 else None
