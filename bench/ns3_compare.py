#!/usr/bin/env python3
"""Every scenario of issue 19 in ns-3 and in sojourn, interleaved in one run: speed as a
ratio, and the behaviour side by side.

    python bench/ns3_compare.py [--short] [--rows A,B,C] [--only NAME] [--reps N]
                                [--json FILE] [--markdown FILE] [--skip-ns3]

Rows (bulk CUBIC flows, all starting at t = 0, on a dumbbell; ACKs return on an
uncongested reverse path):

  A  16 flows, 16 pairs, 10 Mbit/s bottleneck, RTT 100 ms (access 100 Mbit/s / 1 ms,
     bottleneck 48 ms), 300 s simulated (--short: 30 s); one row per discipline: pfifo
     (limit 100), codel, fq_codel, pie, fq_pie (Linux defaults).
  B  80 flows, 80 pairs, 1 Gbit/s bottleneck, RTT 1 ms (access 10 Gbit/s / 0.1 ms,
     bottleneck 0.3 ms), pfifo of 1000 packets (the Linux txqueuelen), 30 s (--short: 3 s).
  C  fq_codel at 100 Mbit/s, RTT 10 ms (access 1 Gbit/s / 1 ms, bottleneck 3 ms), with 1,
     16, 64, 256 and 1,024 flows over min(flows, --max-pairs = 16) sender/receiver pairs
     (flow i on pair i mod pairs), 60 s (--short: 6 s).

For each scenario the script runs ns-3 and then sojourn before moving on to the next, so a
change of the (shared) machine's load hits both sides alike. Printed per scenario: bottleneck
packets per wall second in each simulator and their ratio (also per CPU second, which other
load disturbs less), bottleneck utilisation and mean sojourn time of the bottleneck queue in
each. At the end: the known model differences that explain gaps in behaviour.

ns-3 side: the `ns3` wheel (ns-3 3.44, `from ns import ns`; ~70 MB plus cppyy; not a sojourn
dependency):

    python3 -m venv --system-site-packages .venv-bench && . .venv-bench/bin/activate
    pip install ns3 && pip install .     # sojourn itself, in the same environment

Point-to-point links everywhere; the bottleneck device of the left router holds the
scenario's queue disc (installed before address assignment) and a device queue cut to 1
packet, so the queue disc holds the standing queue; queue discs are configured to the Linux
defaults sojourn uses where ns-3's differ (limits; see MODEL_DIFFERENCES). TCP like Linux where
ns-3 has the knob: TcpCubic, MSS 1448, SACK + timestamps, IW 10, delayed ACK every 2nd
segment / 40 ms, 6 MiB socket buffers; MinRto stays at ns-3's 1 s (see MODEL_DIFFERENCES).
Bottleneck packets = the queue disc's nTotalSentPackets; mean sojourn = the mean of the queue
disc's SojournTime trace (a C++ sink compiled by cppyy: no Python runs per packet). ns-3's
wall time is Simulator::Run() only (topology set-up and cppyy start-up excluded).

sojourn side: `sojourn.run(dict)`; the wall time is the whole call (set-up, run, results),
median of --reps runs; utilisation and mean sojourn from the run's summary. Each
scenario's sojourn runs happen in a fresh Python process (`--sojourn-in-process` keeps the
old way, inside this process): after minutes of ns-3 in the same process, with cppyy's and
ns-3's heap and caches around it, a sojourn run of 0.12 s took 0.17-0.22 s (measured
2026-11-26, bench/HISTORY.md "Quiet, full length, end of session 10").
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

MSS = 1448

MODEL_DIFFERENCES = [
    "Frames: ns-3 point-to-point frames are 1502 B (2-B PPP header), sojourn's 1514 B "
    "(Ethernet), so ns-3 forwards 0.8% more packets for the same bytes; utilisation counts "
    "each simulator's own frame size.",
    "RTO: ns-3 floors the whole RTO at MinRto (1 s default, RFC 6298 2.4); Linux and sojourn "
    "use SRTT + max(4 RTTVAR, 200 ms). ns-3 with MinRto 200 ms fires spurious RTOs once a "
    "standing queue pushes the RTT past 200 ms, so it is left at 1 s.",
    "TCP: ns-3 TcpCubic and its recovery vs sojourn's Linux model (PRR, TLP/RACK, HyStart "
    "details, batch ACKs): drop counts and per-flow shares differ by a few per cent to tens "
    "of per cent while utilisation agrees.",
    "CoDel / FQ-CoDel (docs/disciplines/codel.md, fq_codel.md): ns-3 applies the one-MTU "
    "exemption per flow queue (Linux: whole qdisc), counts L3 bytes with quantum 1500 "
    "(Linux: L2, 1514), maps flows with hash % flows (Linux: multiply-shift), schedules the "
    "next drop after an ECN mark from now; its CoDel default limit is 1.5 MB (set to 1000 "
    "packets here).",
    "PIE / FQ-PIE (docs/disciplines/pie.md, fq_pie.md): ns-3 holds prob at 0 during the burst "
    "allowance, tests the safeguard on qdelay_old, has no de-randomisation by default, decays "
    "by x0.98 when idle (Linux -prob/64), no +2% boost above 250 ms; its PIE default queue is "
    "25 packets (set to 1000 here) and de-randomisation is off by default (switched on here, as "
    "in Linux); ns-3 FQ-PIE drops from the fattest flow on overflow "
    "(Linux: tail drop).",
    "Mean sojourn: both are the queue disc's enqueue-to-dequeue time; ns-3 adds nothing for "
    "its 1-packet device queue, sojourn nothing for the packet being serialised.",
]


@dataclass
class Scenario:
    row: str
    name: str
    flows: int
    pairs: int
    bottleneck_bps: int
    bottleneck_delay_ms: float
    access_bps: int
    access_delay_ms: float
    qdisc: str  # sojourn kind
    limit: int  # packets (the Linux default of the kind unless the row says otherwise)
    duration_s: float

    @property
    def rtt_ms(self) -> float:
        return 2 * (2 * self.access_delay_ms + self.bottleneck_delay_ms)


LINUX_LIMITS = {"pfifo": 1000, "codel": 1000, "fq_codel": 10240, "pie": 1000, "fq_pie": 10240}


def scenarios(short: bool, max_pairs: int) -> list[Scenario]:
    out = []
    ta = 30.0 if short else 300.0
    for q in ("pfifo", "codel", "fq_codel", "pie", "fq_pie"):
        out.append(Scenario("A", f"A 16 flows 10M/100ms {q}", 16, 16, 10_000_000, 48, 100_000_000, 1, q,
                            100 if q == "pfifo" else LINUX_LIMITS[q], ta))
    out.append(Scenario("B", "B 80 flows 1G/1ms pfifo", 80, 80, 1_000_000_000, 0.3, 10_000_000_000, 0.1, "pfifo",
                        1000, 3.0 if short else 30.0))
    for n in (1, 16, 64, 256, 1024):
        out.append(Scenario("C", f"C {n} flows 100M/10ms fq_codel", n, min(n, max_pairs), 100_000_000, 3,
                            1_000_000_000, 1, "fq_codel", LINUX_LIMITS["fq_codel"], 6.0 if short else 60.0))
    return out


def _rate(bps: int) -> str:
    for unit, f in (("Gbit", 10**9), ("Mbit", 10**6), ("kbit", 10**3)):
        if bps % f == 0:
            return f"{bps // f}{unit}"
    return f"{bps}bit"


def _ms(x: float) -> str:
    return f"{x:g}ms"


# --------------------------------------------------------------------------- sojourn


def sojourn_config(s: Scenario) -> dict:
    qdisc = {"kind": s.qdisc}
    if s.limit != LINUX_LIMITS[s.qdisc]:
        qdisc["limit"] = s.limit
    return {
        "name": s.name.replace(" ", "-").replace("/", "-"),
        "duration": f"{s.duration_s:g}s",
        "topology": {
            "kind": "dumbbell",
            "pairs": s.pairs,
            "bottleneck": {"rate": _rate(s.bottleneck_bps), "delay": _ms(s.bottleneck_delay_ms), "qdisc": qdisc},
            "access": {"rate": _rate(s.access_bps), "delay": _ms(s.access_delay_ms)},
        },
        "transport": {"cc": "cubic"},
        "workload": [{"kind": "bulk", "pairs": "all", "count": s.flows}],
    }


def run_sojourn_fresh(s: Scenario, reps: int, seed: int = 1) -> dict:
    """`run_sojourn` in a fresh interpreter (multiprocessing's spawn), as a user's own
    process would run it: not beside ns-3's heap in this one. Its timings are the child's."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        res = pool.apply(run_sojourn, (s, reps, seed))
    res["process"] = "fresh"
    return res


def _engine_build() -> str:
    try:
        from sojourn import _engine_info
    except ImportError:  # a sojourn older than the PGO build
        return "unknown"
    return _engine_info.describe()


def run_sojourn(s: Scenario, reps: int, seed: int = 1) -> dict:
    import sojourn

    cfg = sojourn_config(s)
    walls, cpus = [], []
    res = None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        res = sojourn.run(cfg, seed=seed)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    link = res.summary["links"]["bottleneck"]
    pkts = int(link["tx_packets"])
    goodputs = [float(b) * 8 / s.duration_s for b in res.flows["delivered_bytes"]]
    return {
        "simulator": f"sojourn {getattr(sojourn, '__version__', '?')}",
        # Whether the engine was optimised with the PGO profile (docs/pgo.md).
        "engine": _engine_build(),
        "wall_s": wall, "wall_s_all": walls, "cpu_s": cpu,
        "bottleneck_packets": pkts,
        "bottleneck_packets_per_wall_s": pkts / wall,
        "bottleneck_packets_per_cpu_s": pkts / cpu,
        "events": res.summary.get("events"),
        "utilisation": float(link["utilisation"]),
        "mean_sojourn_ms": float(link["sojourn_ms"]["mean"]),
        "drops": int(link["drops_total"]),
        "goodput_sum_bps": sum(goodputs),
        "retransmits": int(res.flows["retransmits"].sum()),
    }


# --------------------------------------------------------------------------- ns-3


def ns3_build_info() -> dict:
    """Which build the wheel ships: ns-3's CMake export names the build profile and the
    NS_LOG / NS_ASSERT switches in every target's INTERFACE_COMPILE_DEFINITIONS."""
    import importlib.util

    info = {"profile": "unknown", "log_enabled": None, "assert_enabled": None}
    spec = importlib.util.find_spec("ns3")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for lib in ("lib64", "lib"):
            f = Path(root) / lib / "cmake" / "ns3" / "ns3Targets.cmake"
            if f.exists():
                text = f.read_text(errors="replace")
                for p in ("DEBUG", "DEFAULT", "RELEASE", "OPTIMIZED"):
                    if f"NS3_BUILD_PROFILE_{p}" in text:
                        info["profile"] = p.lower()
                info["log_enabled"] = "NS3_LOG_ENABLE" in text
                info["assert_enabled"] = "NS3_ASSERT_ENABLE" in text
                break
    try:
        from importlib.metadata import version

        info["version"] = version("ns3")
    except Exception:  # pragma: no cover
        info["version"] = "?"
    return info


HELPERS_CPP = r"""
#include "ns3/core-module.h"
#include "ns3/traffic-control-module.h"
namespace sojourn_bench {
// Mean of a queue disc's SojournTime trace: a C++ sink, so no Python runs per packet.
struct SojournMean {
    double sum_s = 0;
    uint64_t n = 0;
    void Sink(ns3::Time t) { sum_s += t.GetSeconds(); n++; }
};
SojournMean* TraceSojourn(ns3::Ptr<ns3::QueueDisc> q) {
    auto* m = new SojournMean();
    q->TraceConnectWithoutContext("SojournTime", ns3::MakeCallback(&SojournMean::Sink, m));
    return m;
}
}
"""

_CPP_DEFINED = False


def _ns3_qdisc(s: Scenario) -> tuple[str, list]:
    """ns-3 queue disc type and attributes for the scenario: sojourn's (Linux's) defaults
    set explicitly where ns-3's differ."""
    lim = ("MaxSize", f"{s.limit}p")
    if s.qdisc == "pfifo":
        return "ns3::FifoQueueDisc", [lim]
    if s.qdisc == "codel":
        return "ns3::CoDelQueueDisc", [lim, ("Target", "5ms"), ("Interval", "100ms")]
    if s.qdisc == "fq_codel":
        return "ns3::FqCoDelQueueDisc", [lim, ("Target", "5ms"), ("Interval", "100ms"), ("Flows", "1024"),
                                         ("DropBatchSize", "64")]
    if s.qdisc == "pie":
        return "ns3::PieQueueDisc", [lim, ("QueueDelayReference", "15ms"), ("Tupdate", "15ms"),
                                     ("MaxBurstAllowance", "150ms"), ("A", "0.125"), ("B", "1.25"),
                                     ("UseDerandomization", "true")]  # always on in Linux
    if s.qdisc == "fq_pie":
        return "ns3::FqPieQueueDisc", [lim, ("QueueDelayReference", "15ms"), ("Tupdate", "15ms"),
                                       ("MaxBurstAllowance", "150ms"), ("A", "0.125"), ("B", "1.25"), ("Flows", "1024"),
                                       ("UseDerandomization", "true")]
    raise ValueError(s.qdisc)


def run_ns3(s: Scenario, min_rto_ms: float = 1000) -> dict:
    global _CPP_DEFINED
    from ns import ns
    import cppyy

    if not _CPP_DEFINED:
        cppyy.cppdef(HELPERS_CPP)
        _CPP_DEFINED = True
    sb = cppyy.gbl.sojourn_bench

    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::TcpCubic"))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(MSS))
    ns.Config.SetDefault("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
    ns.Config.SetDefault("ns3::TcpSocket::DelAckCount", ns.UintegerValue(2))
    ns.Config.SetDefault("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.MilliSeconds(40)))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(6 << 20))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(6 << 20))
    ns.Config.SetDefault("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MilliSeconds(min_rto_ms)))
    ns.Config.SetDefault("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))
    ns.Config.SetDefault("ns3::TcpSocketBase::Timestamp", ns.BooleanValue(True))

    t_setup = time.perf_counter()
    senders = ns.NodeContainer()
    senders.Create(s.pairs)
    receivers = ns.NodeContainer()
    receivers.Create(s.pairs)
    routers = ns.NodeContainer()
    routers.Create(2)
    stack = ns.InternetStackHelper()
    stack.Install(senders)
    stack.Install(receivers)
    stack.Install(routers)

    access = ns.PointToPointHelper()
    access.SetDeviceAttribute("DataRate", ns.StringValue(f"{s.access_bps}bps"))
    access.SetChannelAttribute("Delay", ns.StringValue(f"{s.access_delay_ms * 1000:g}us"))
    bottleneck = ns.PointToPointHelper()
    bottleneck.SetDeviceAttribute("DataRate", ns.StringValue(f"{s.bottleneck_bps}bps"))
    bottleneck.SetChannelAttribute("Delay", ns.StringValue(f"{s.bottleneck_delay_ms * 1000:g}us"))
    bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", ns.StringValue("1p"))

    left, right = routers.Get(0), routers.Get(1)
    bdevs = bottleneck.Install(left, right)
    tch = ns.TrafficControlHelper()
    kind, attrs = _ns3_qdisc(s)
    for k, v in attrs:  # attribute defaults of the queue disc type, parsed from text by ns-3
        ns.Config.SetDefault(f"{kind}::{k}", ns.StringValue(v))
    tch.SetRootQueueDisc(kind)
    qdiscs = tch.Install(bdevs.Get(0))  # before address assignment (else pfifo_fast)
    qdisc = qdiscs.Get(0)

    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.0"))
    addr.Assign(bdevs)
    rx_addrs = []
    for i in range(s.pairs):
        sd = access.Install(senders.Get(i), left)
        addr.SetBase(ns.Ipv4Address(f"10.{1 + i // 256}.{i % 256}.0"), ns.Ipv4Mask("255.255.255.0"))
        addr.Assign(sd)
        rd = access.Install(right, receivers.Get(i))
        addr.SetBase(ns.Ipv4Address(f"10.{128 + i // 256}.{i % 256}.0"), ns.Ipv4Mask("255.255.255.0"))
        ifs = addr.Assign(rd)
        rx_addrs.append(ifs.GetAddress(1))
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    port = 5000
    sinks = []
    for i in range(s.pairs):
        sink_helper = ns.PacketSinkHelper(
            "ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
        sapps = sink_helper.Install(receivers.Get(i))
        sapps.Start(ns.Seconds(0))
        sinks.append(sapps.Get(0))
    for f in range(s.flows):
        i = f % s.pairs
        bulk = ns.BulkSendHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(rx_addrs[i], port).ConvertTo())
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        bulk.SetAttribute("SendSize", ns.UintegerValue(MSS))
        apps = bulk.Install(senders.Get(i))
        apps.Start(ns.Seconds(0))

    soj = sb.TraceSojourn(qdisc)
    ns.Simulator.Stop(ns.Seconds(s.duration_s))
    setup = time.perf_counter() - t_setup
    t0, c0 = time.perf_counter(), time.process_time()
    ns.Simulator.Run()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    events = int(ns.Simulator.GetEventCount())

    st = qdisc.GetStats()
    pkts = int(st.nTotalSentPackets)
    sent_bytes = int(st.nTotalSentBytes)
    drops = int(st.nTotalDroppedPackets)
    goodput = sum(int(x.GetObject[ns.PacketSink]().GetTotalRx()) * 8 / s.duration_s for x in sinks)
    util = (sent_bytes + 2 * pkts) * 8 / (s.bottleneck_bps * s.duration_s)
    mean_soj_ms = soj.sum_s / soj.n * 1000 if soj.n else float("nan")
    ns.Simulator.Destroy()
    return {
        "simulator": "ns-3",
        "setup_s": setup, "wall_s": wall, "cpu_s": cpu,
        "bottleneck_packets": pkts,
        "bottleneck_packets_per_wall_s": pkts / wall,
        "bottleneck_packets_per_cpu_s": pkts / cpu,
        "events": events,
        "utilisation": util,
        "mean_sojourn_ms": mean_soj_ms,
        "drops": drops,
        "goodput_sum_bps": goodput,
    }


# --------------------------------------------------------------------------- report


def _f(v, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and v != v) else format(v, fmt)


HEADER = ("scenario", "sim s", "ns-3 pkt/wall s", "sojourn pkt/wall s", "ratio wall", "ratio CPU",
          "util ns-3", "util sojourn", "sojourn ms ns-3", "sojourn ms sojourn")


def table_rows(results: list) -> list:
    rows = []
    for r in results:
        n, s = r.get("ns3") or {}, r["sojourn"]
        rw = s["bottleneck_packets_per_wall_s"] / n["bottleneck_packets_per_wall_s"] if n else None
        rc = s["bottleneck_packets_per_cpu_s"] / n["bottleneck_packets_per_cpu_s"] if n else None
        rows.append((r["scenario"]["name"], f"{r['scenario']['duration_s']:g}",
                     _f(n.get("bottleneck_packets_per_wall_s"), ",.0f"), _f(s["bottleneck_packets_per_wall_s"], ",.0f"),
                     _f(rw, ".0f") + ("x" if rw else ""), _f(rc, ".0f") + ("x" if rc else ""),
                     _f(n.get("utilisation"), ".3f"), _f(s["utilisation"], ".3f"),
                     _f(n.get("mean_sojourn_ms"), ".2f"), _f(s["mean_sojourn_ms"], ".2f")))
    return rows


def print_table(rows: list) -> None:
    w = [max(len(str(x)) for x in col) for col in zip(HEADER, *rows)]
    for line in [HEADER, *rows]:
        print("  ".join(str(x).rjust(w[i]) if i else str(x).ljust(w[i]) for i, x in enumerate(line)))


def markdown_table(rows: list) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="examples:\n  python bench/ns3_compare.py --short            # minutes\n"
                                        "  python bench/ns3_compare.py --rows C --short\n"
                                        "  python bench/ns3_compare.py --json ns3.json     # full length (long)\n",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--short", action="store_true", help="a tenth of the simulated time (A 30 s, B 3 s, C 6 s)")
    ap.add_argument("--rows", default="A,B,C", help="which rows (default A,B,C)")
    ap.add_argument("--only", help="run only the scenarios whose name contains this text")
    ap.add_argument("--max-pairs", type=int, default=16, help="row C: at most this many sender/receiver pairs")
    ap.add_argument("--reps", type=int, default=3, help="sojourn repetitions (median wall time)")
    ap.add_argument("--json", metavar="FILE", help="write every number as JSON")
    ap.add_argument("--markdown", metavar="FILE", help="write the ratio table as Markdown")
    ap.add_argument("--ns3-min-rto-ms", type=float, default=1000, help="ns-3 TcpSocketBase::MinRto (default 1000)")
    ap.add_argument("--skip-ns3", action="store_true", help="run sojourn only")
    ap.add_argument("--sojourn-in-process", action="store_true",
                    help="run sojourn in this process, beside ns-3 (default: a fresh process per scenario)")
    args = ap.parse_args(argv)
    rows = {x.strip().upper() for x in args.rows.split(",") if x.strip()}
    if not rows <= {"A", "B", "C"}:
        print(f"--rows: expected letters among A, B, C; got {args.rows!r}", file=sys.stderr)
        return 2
    scns = [s for s in scenarios(args.short, args.max_pairs) if s.row in rows and (not args.only or args.only in s.name)]

    out = {"machine": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(), "python": platform.python_version(),
                       "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())},
           "short": args.short, "results": [], "model_differences": MODEL_DIFFERENCES}
    have_ns3 = False
    if not args.skip_ns3:
        import importlib.util

        have_ns3 = importlib.util.find_spec("ns") is not None and importlib.util.find_spec("ns3") is not None
        if not have_ns3:
            print("note: ns-3's Python bindings are not installed; only sojourn runs.\n"
                  "      pip install ns3   # ~70 MB wheel plus cppyy (`from ns import ns`)", file=sys.stderr)
        else:
            out["ns3_build"] = ns3_build_info()
            b = out["ns3_build"]
            print(f"ns-3 {b.get('version')}: build profile {b['profile']}, NS_LOG compiled in: {b['log_enabled']}, "
                  f"NS_ASSERT compiled in: {b['assert_enabled']}", flush=True)
    for s in scns:
        r = {"scenario": {**asdict(s), "rtt_ms": s.rtt_ms}, "loadavg_before": os.getloadavg()[0]}
        if have_ns3:
            print(f"[ns-3]    {s.name}, {s.duration_s:g} s ...", flush=True)
            r["ns3"] = run_ns3(s, args.ns3_min_rto_ms)
        print(f"[sojourn] {s.name}, {s.duration_s:g} s x {args.reps} ...", flush=True)
        if args.sojourn_in_process:
            r["sojourn"] = {**run_sojourn(s, args.reps), "process": "shared with ns-3"}
        else:
            r["sojourn"] = run_sojourn_fresh(s, args.reps)
        out["results"].append(r)
        if args.json:  # after every scenario: a long run interrupted keeps what it measured
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    out["machine"]["loadavg_at_end"] = os.getloadavg()

    rows_t = table_rows(out["results"])
    print("\nbottleneck packets per second, ratio = sojourn / ns-3 (wall and CPU seconds); utilisation; "
          "mean sojourn time in the bottleneck queue")
    print_table(rows_t)
    la0, la1 = out["machine"]["loadavg_at_start"][0], out["machine"]["loadavg_at_end"][0]
    print(f"\nload average {la0:.1f} at start, {la1:.1f} at end ({out['machine']['cpus']} CPUs)")
    if have_ns3:
        print("\nknown model differences:")
        for d in MODEL_DIFFERENCES:
            print(f"- {d}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(rows_t))
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
