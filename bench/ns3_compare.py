#!/usr/bin/env python3
"""The same TCP dumbbell in ns-3 and in sojourn, side by side: speed and key results.

    python bench/ns3_compare.py [--short] [--duration S] [--reps N] [--json FILE]
                                [--ns3-min-rto-ms MS] [--skip-ns3]

Scenario (sojourn's `cargo run -p sojourn-bench -- tcp`, bench/main.rs): 16 CUBIC bulk
flows, 16 sender/receiver pairs, access links 100 Mbit/s / 1 ms, bottleneck 10 Mbit/s /
48 ms (base RTT 100 ms), bottleneck queue FIFO of 100 packets, MSS 1448, T seconds
simulated (default 60; --short 10). All flows start at t = 0.

ns-3 side (needs the `ns3` wheel: `pip install ns3`, ~70 MB; not a sojourn dependency):
point-to-point links everywhere; on the bottleneck device of the left router a
FifoQueueDisc with MaxSize 100p and the device's own DropTail queue cut to 1 packet (the
usual ns-3 traffic-control setup, so the queue disc holds the standing queue: at most
100 waiting + 1 in the device queue + 1 on the wire); every other device keeps ns-3's
defaults (pfifo_fast 1000p installed by Ipv4AddressHelper, device queue 100p). TCP is
configured like sojourn's Linux defaults where ns-3 has the knob: TcpCubic, MSS 1448,
timestamps + SACK (ns-3 defaults), initial window 10, delayed-ACK timeout 40 ms, ACK every
2nd segment, 6 MiB socket buffers. MinRto stays at ns-3's 1 s: ns-3 applies it as a floor
on the whole RTO (RFC 6298 2.4), whereas Linux computes RTO = SRTT + max(4 RTTVAR, 200 ms)
(always >= SRTT + 200 ms, ~400 ms here); ns-3 with MinRto 200 ms fires spurious RTOs when
the standing queue pushes the RTT to ~210 ms (--ns3-min-rto-ms 200 shows it: 51 RTOs and
579 retransmissions for 253 drops in 10 s, Jain 0.91). Retransmissions and RTO expiries
are counted by C++ trace sinks on every socket's Retransmission and CongState traces.
Bottleneck packets = the queue disc's nTotalSentPackets (packets handed to the device, left -> right); mean queue = the queue
disc's length sampled every 10 ms (a C++ sampler compiled by cppyy, so no Python runs per
packet); goodput = each PacketSink's received bytes / T. The wall time is that of
Simulator::Run() only (the ~20 s of cppyy start-up and the topology build are excluded).

sojourn side: `sojourn.run(dict)` with the bench's experiment (pfifo limit 100, cc cubic)
and `[record] interval = "10ms"` on the bottleneck for the same queue sampling; the wall
time is the whole `sojourn.run` call (set-up + run + results), median of --reps runs.

Utilisation = busy fraction of the bottleneck: sojourn's `utilisation` (1514-B Ethernet
frames); ns-3's (queue-disc bytes + 2-B PPP header per packet) * 8 / (rate * T) (ns-3's
frames are 1502 B). Fairness = Jain's index of the per-flow goodputs. "delivered /
forwarded" = in-order payload delivered to the receivers / (bottleneck packets * MSS): the
share of bottleneck packets that carried new data (drops happen before the link, so only
spurious retransmissions and the data still in flight at the end lower it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

FLOWS = 16
BOTTLENECK_BPS = 10_000_000
ACCESS_BPS = 100_000_000
BOTTLENECK_DELAY_MS = 48
ACCESS_DELAY_MS = 1
QUEUE_LIMIT = 100
MSS = 1448
SAMPLE_MS = 10


def jain(xs):
    xs = [float(x) for x in xs]
    s2 = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * s2) if s2 > 0 else float("nan")


# --------------------------------------------------------------------------- sojourn


def sojourn_config(duration_s: float) -> dict:
    return {
        "duration": f"{duration_s}s",
        "topology": {
            "kind": "dumbbell",
            "pairs": FLOWS,
            "bottleneck": {
                "rate": "10Mbit",
                "delay": f"{BOTTLENECK_DELAY_MS}ms",
                "qdisc": {"kind": "pfifo", "limit": QUEUE_LIMIT},
            },
            "access": {"rate": "100Mbit", "delay": f"{ACCESS_DELAY_MS}ms"},
        },
        "transport": {"cc": "cubic"},
        "workload": [{"kind": "bulk", "pairs": "all"}],
        "record": {"interval": f"{SAMPLE_MS}ms", "links": ["bottleneck"]},
    }


def run_sojourn(duration_s: float, reps: int, seed: int = 1) -> dict:
    import sojourn

    cfg = sojourn_config(duration_s)
    walls, cpus = [], []
    res = None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        res = sojourn.run(cfg, seed=seed)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    wall = statistics.median(walls)
    cpu = statistics.median(cpus)
    link = res.summary["links"]["bottleneck"]
    pkts = int(link["tx_packets"])
    drops = int(link["drops_total"])
    q = res.series("bottleneck", "queue_packets")
    qvals = [float(v) for v in (q.values if hasattr(q, "values") else q)]
    goodputs = [float(b) * 8 / duration_s for b in res.flows["delivered_bytes"]]
    return {
        "simulator": f"sojourn {getattr(sojourn, '__version__', '?')}",
        "wall_s": wall,
        "wall_s_all": walls,
        "cpu_s": cpu,
        "bottleneck_packets": pkts,
        "bottleneck_packets_per_wall_s": pkts / wall,
        "bottleneck_packets_per_cpu_s": pkts / cpu,
        "events": res.summary.get("events"),
        "utilisation": float(link["utilisation"]),
        "goodput_sum_bps": sum(goodputs),
        "drops": drops,
        "drop_rate": drops / (pkts + drops) if pkts + drops else 0.0,
        "mean_queue_packets": sum(qvals) / len(qvals) if qvals else float("nan"),
        "jain_fairness": jain(goodputs),
        "delivered_per_forwarded": sum(goodputs) * duration_s / 8 / (MSS * pkts) if pkts else float("nan"),
        "retransmits": int(res.flows["retransmits"].sum()),
        "rtos": int(res.flows["rtos"].sum()),
        "per_flow_goodput_bps": goodputs,
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
        f = Path(root) / "lib64" / "cmake" / "ns3" / "ns3Targets.cmake"
        if not f.exists():
            f = Path(root) / "lib" / "cmake" / "ns3" / "ns3Targets.cmake"
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


SAMPLER_CPP = r"""
#include "ns3/core-module.h"
#include "ns3/traffic-control-module.h"
#include "ns3/internet-module.h"
namespace sojourn_bench {
// Samples a queue disc's length every `period` (scheduled in C++: no Python per event).
struct QueueSampler {
    ns3::Ptr<ns3::QueueDisc> q;
    ns3::Time period;
    double sum = 0;
    uint64_t n = 0;
    void Sample() {
        sum += q->GetNPackets();
        n++;
        ns3::Simulator::Schedule(period, &QueueSampler::Sample, this);
    }
};
// Counts TCP retransmissions and entries into Recovery / Loss (RTO) over all sockets:
// C++ trace sinks, called only on those events.
struct TcpCounters {
    uint64_t retransmits = 0, recoveries = 0, rtos = 0;
    void Retx(ns3::Ptr<const ns3::Packet>, const ns3::TcpHeader&, const ns3::Address&,
              const ns3::Address&, ns3::Ptr<const ns3::TcpSocketBase>) { retransmits++; }
    void State(ns3::TcpSocketState::TcpCongState_t, ns3::TcpSocketState::TcpCongState_t to) {
        if (to == ns3::TcpSocketState::CA_RECOVERY) recoveries++;
        if (to == ns3::TcpSocketState::CA_LOSS) rtos++;
    }
    void Connect() {
        ns3::Config::ConnectWithoutContextFailSafe(
            "/NodeList/*/$ns3::TcpL4Protocol/SocketList/*/Retransmission",
            ns3::MakeCallback(&TcpCounters::Retx, this));
        ns3::Config::ConnectWithoutContextFailSafe(
            "/NodeList/*/$ns3::TcpL4Protocol/SocketList/*/CongState",
            ns3::MakeCallback(&TcpCounters::State, this));
    }
};
TcpCounters* StartTcpCounters(double at_s) {
    auto* c = new TcpCounters();
    ns3::Simulator::Schedule(ns3::Seconds(at_s), &TcpCounters::Connect, c);
    return c;
}
QueueSampler* StartSampler(ns3::Ptr<ns3::QueueDisc> q, double period_s) {
    auto* s = new QueueSampler();
    s->q = q;
    s->period = ns3::Seconds(period_s);
    ns3::Simulator::Schedule(s->period, &QueueSampler::Sample, s);
    return s;
}
}
"""


def run_ns3(duration_s: float, min_rto_ms: float = 1000) -> dict:
    from ns import ns
    import cppyy

    cppyy.cppdef(SAMPLER_CPP)
    sb = cppyy.gbl.sojourn_bench

    # TCP as close to sojourn's Linux defaults as ns-3 allows.
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

    senders = ns.NodeContainer()
    senders.Create(FLOWS)
    receivers = ns.NodeContainer()
    receivers.Create(FLOWS)
    routers = ns.NodeContainer()
    routers.Create(2)
    stack = ns.InternetStackHelper()
    stack.Install(senders)
    stack.Install(receivers)
    stack.Install(routers)

    access = ns.PointToPointHelper()
    access.SetDeviceAttribute("DataRate", ns.StringValue("100Mbps"))
    access.SetChannelAttribute("Delay", ns.StringValue(f"{ACCESS_DELAY_MS}ms"))
    bottleneck = ns.PointToPointHelper()
    bottleneck.SetDeviceAttribute("DataRate", ns.StringValue("10Mbps"))
    bottleneck.SetChannelAttribute("Delay", ns.StringValue(f"{BOTTLENECK_DELAY_MS}ms"))
    bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", ns.StringValue("1p"))

    left, right = routers.Get(0), routers.Get(1)
    bdevs = bottleneck.Install(left, right)
    tch = ns.TrafficControlHelper()
    tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", ns.StringValue(f"{QUEUE_LIMIT}p"))
    qdiscs = tch.Install(bdevs.Get(0))  # before address assignment (else pfifo_fast)
    qdisc = qdiscs.Get(0)

    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.0"))
    addr.Assign(bdevs)
    rx_addrs = []
    for i in range(FLOWS):
        sd = access.Install(senders.Get(i), left)
        addr.SetBase(ns.Ipv4Address(f"10.1.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        addr.Assign(sd)
        rd = access.Install(right, receivers.Get(i))
        addr.SetBase(ns.Ipv4Address(f"10.2.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        ifs = addr.Assign(rd)
        rx_addrs.append(ifs.GetAddress(1))
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    port = 5000
    sinks = []
    stop = ns.Seconds(duration_s)
    for i in range(FLOWS):
        sink_helper = ns.PacketSinkHelper(
            "ns3::TcpSocketFactory",
            ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
        sapps = sink_helper.Install(receivers.Get(i))
        sapps.Start(ns.Seconds(0))
        sinks.append(sapps.Get(0))
        bulk = ns.BulkSendHelper(
            "ns3::TcpSocketFactory", ns.InetSocketAddress(rx_addrs[i], port).ConvertTo())
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        bulk.SetAttribute("SendSize", ns.UintegerValue(MSS))
        apps = bulk.Install(senders.Get(i))
        apps.Start(ns.Seconds(0))

    sampler = sb.StartSampler(qdisc, SAMPLE_MS / 1000.0)
    counters = sb.StartTcpCounters(0.001)  # the BulkSend sockets exist from t = 0
    ns.Simulator.Stop(stop)
    t0, c0 = time.perf_counter(), time.process_time()
    ns.Simulator.Run()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    events = int(ns.Simulator.GetEventCount())

    st = qdisc.GetStats()
    pkts = int(st.nTotalSentPackets)
    sent_bytes = int(st.nTotalSentBytes)
    drops = int(st.nTotalDroppedPackets)
    goodputs = []
    for s in sinks:
        sink = s.GetObject[ns.PacketSink]()
        goodputs.append(int(sink.GetTotalRx()) * 8 / duration_s)
    util = (sent_bytes + 2 * pkts) * 8 / (BOTTLENECK_BPS * duration_s)
    mean_q = sampler.sum / sampler.n if sampler.n else float("nan")
    ns.Simulator.Destroy()
    return {
        "simulator": "ns-3",
        "wall_s": wall,
        "cpu_s": cpu,
        "bottleneck_packets": pkts,
        "bottleneck_packets_per_wall_s": pkts / wall,
        "bottleneck_packets_per_cpu_s": pkts / cpu,
        "events": events,
        "utilisation": util,
        "goodput_sum_bps": sum(goodputs),
        "drops": drops,
        "drop_rate": drops / (pkts + drops) if pkts + drops else 0.0,
        "mean_queue_packets": mean_q,
        "jain_fairness": jain(goodputs),
        "delivered_per_forwarded": sum(goodputs) * duration_s / 8 / (MSS * pkts) if pkts else float("nan"),
        "retransmits": int(counters.retransmits),
        "recoveries": int(counters.recoveries),
        "rtos": int(counters.rtos),
        "per_flow_goodput_bps": goodputs,
    }


# --------------------------------------------------------------------------- report


ROWS = [
    ("wall seconds", "wall_s", "{:.3f}"),
    ("CPU seconds", "cpu_s", "{:.3f}"),
    ("bottleneck packets", "bottleneck_packets", "{:d}"),
    ("bottleneck packets / wall s", "bottleneck_packets_per_wall_s", "{:,.0f}"),
    ("bottleneck packets / CPU s", "bottleneck_packets_per_cpu_s", "{:,.0f}"),
    ("events", "events", "{:,}"),
    ("bottleneck utilisation", "utilisation", "{:.4f}"),
    ("sum of goodputs (Mbit/s)", "goodput_sum_bps", None),
    ("drops", "drops", "{:d}"),
    ("drop rate", "drop_rate", "{:.4f}"),
    ("mean queue (packets)", "mean_queue_packets", "{:.1f}"),
    ("Jain's fairness (goodput)", "jain_fairness", "{:.4f}"),
    ("delivered / forwarded", "delivered_per_forwarded", "{:.4f}"),
    ("TCP retransmissions", "retransmits", "{:d}"),
    ("RTO expiries", "rtos", "{:d}"),
]


def fmt(key, f, r):
    v = r.get(key) if r else None
    if v is None:
        return "-"
    if key == "goodput_sum_bps":
        return f"{v / 1e6:.3f}"
    try:
        return f.format(v)
    except (ValueError, TypeError):
        return str(v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="10 s simulated instead of 60 s")
    ap.add_argument("--duration", type=float, help="simulated seconds (overrides --short)")
    ap.add_argument("--reps", type=int, default=3, help="sojourn repetitions (median wall time)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--ns3-min-rto-ms", type=float, default=1000,
                    help="ns-3 TcpSocketBase::MinRto, default ns-3's 1000 (RFC 6298 2.4). It floors "
                         "the whole RTO; Linux adds its 200 ms to SRTT instead, so 200 here gives "
                         "spurious RTOs once the 100-packet queue adds ~120 ms to the RTT")
    ap.add_argument("--skip-ns3", action="store_true", help="run sojourn only")
    args = ap.parse_args(argv)
    T = args.duration if args.duration else (10.0 if args.short else 60.0)

    out = {
        "scenario": {
            "flows": FLOWS, "cc": "cubic", "bottleneck_bps": BOTTLENECK_BPS,
            "bottleneck_delay_ms": BOTTLENECK_DELAY_MS, "access_bps": ACCESS_BPS,
            "access_delay_ms": ACCESS_DELAY_MS, "queue_limit_packets": QUEUE_LIMIT,
            "mss": MSS, "duration_s": T,
        },
        "machine": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
                    "python": platform.python_version()},
    }

    ns3_res = None
    ns3_ok = False
    if not args.skip_ns3:
        try:
            import importlib.util

            ns3_ok = importlib.util.find_spec("ns") is not None and importlib.util.find_spec("ns3") is not None
        except Exception:
            ns3_ok = False
        if not ns3_ok:
            print("note: ns-3's Python bindings are not installed; only sojourn runs.\n"
                  "      pip install ns3   # ~70 MB wheel (cppyy-based, `from ns import ns`)",
                  file=sys.stderr)
            out["ns3"] = {"skipped": "ns3 wheel not installed (pip install ns3)"}
        else:
            out["ns3_build"] = ns3_build_info()
            print(f"ns-3 {out['ns3_build'].get('version')}: build profile "
                  f"{out['ns3_build']['profile']}, NS_LOG compiled in: {out['ns3_build']['log_enabled']}, "
                  f"NS_ASSERT compiled in: {out['ns3_build']['assert_enabled']}", flush=True)
            print(f"running ns-3 ({T:g} s simulated; cppyy start-up takes ~20 s) ...", flush=True)
            ns3_res = run_ns3(T, args.ns3_min_rto_ms)
            out["ns3"] = ns3_res

    print(f"running sojourn ({T:g} s simulated, {args.reps} reps) ...", flush=True)
    soj = run_sojourn(T, args.reps)
    out["sojourn"] = soj
    out["machine"]["loadavg_at_end"] = os.getloadavg()
    if ns3_res:
        out["speedup_bottleneck_packets_per_wall_s"] = (
            soj["bottleneck_packets_per_wall_s"] / ns3_res["bottleneck_packets_per_wall_s"])
        out["speedup_bottleneck_packets_per_cpu_s"] = (
            soj["bottleneck_packets_per_cpu_s"] / ns3_res["bottleneck_packets_per_cpu_s"])

    print(f"\n16 CUBIC flows, 10 Mbit/s / 48 ms bottleneck (RTT 100 ms), FIFO 100 p, {T:g} s simulated")
    w = max(len(r[0]) for r in ROWS)
    print(f"{'':{w}}  {'ns-3':>14}  {'sojourn':>14}")
    for label, key, f in ROWS:
        print(f"{label:{w}}  {fmt(key, f, ns3_res):>14}  {fmt(key, f, soj):>14}")
    if ns3_res:
        print(f"\nspeed-up (bottleneck packets per wall second): "
              f"{out['speedup_bottleneck_packets_per_wall_s']:.0f}x wall, "
              f"{out['speedup_bottleneck_packets_per_cpu_s']:.0f}x CPU")
    print(f"load average: {out['machine']['loadavg_at_start'][0]:.2f} at start, "
          f"{out['machine']['loadavg_at_end'][0]:.2f} at end ({out['machine']['cpus']} CPUs)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
