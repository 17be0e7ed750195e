//! How much CPU time a simulated run will take, estimated before it starts from the
//! packet rate its workloads offer (docs/limits.md, "How long a run takes").
//!
//! The engine's work is per packet per link (enqueue, dequeue, serialisation, arrival at
//! the far end) plus per TCP connection per simulated second (its timers, its cold state
//! touched by each event). So the estimate is
//!
//! ```text
//! CPU s = link packets per simulated second × duration × COST_PER_LINK_PACKET_S
//!       + TCP flows × their active seconds × COST_PER_TCP_FLOW_SECOND_S
//!       + time-series rows × COST_PER_SERIES_ROW_S + logged packets × COST_PER_LOGGED_PACKET_S
//!       + links × COST_PER_LINK_SETUP_S + flows × COST_PER_FLOW_SETUP_S + FRONT_CPU_S
//! ```
//!
//! where a link carries what the flows routed over it offer, at most its rate: a UDP flow
//! its rate (times its on fraction), a bulk TCP flow the slowest link of its path, an open
//! loop its arrivals × their mean size with headers, a closed loop at most one transfer per
//! think time; TCP's ACKs (one per two segments, delayed ACKs) on the reverse path.

use crate::experiment::{
    recorded_rows, static_routes, transfer_wire_bytes, transfers_of, walk_route, Experiment,
};
use crate::transport::{ETHERNET_HEADER_BYTES, IP_TCP_HEADER_BYTES, TIMESTAMP_OPTION_BYTES};
use crate::workload::{OnOff, TcpKind, WorkloadPlan};

/// CPU seconds per packet crossing one link. Measured on this machine (shared 2-core AMD
/// EPYC, a release build without the PGO profile, `sojourn-bench file … --set
/// duration=20s --set warmup=0s`, 2026-11-29): 5.3–15.5 M link packets per CPU second
/// across experiments/examples (cbr-fifo-*: 13.3–15.5 M), experiments/repro (cocoa
/// oneflow 10.4 M, operating-ranges 11.1–12.0 M, lstf 5.3 M, age-based 1 G / 10 G 14.5 /
/// 15.5 M) and the bad-input catalogue's base file (11.8 M); 200 ns is the slow end
/// (5 M / CPU s), so the estimate errs long for ordinary runs.
pub const COST_PER_LINK_PACKET_S: f64 = 200e-9;

/// CPU seconds per TCP connection per simulated second beyond its packets: its timers and
/// its state falling out of the cache when thousands are active (docs/engine.md, "Many
/// flows"). Measured with the same build, 5 s runs of the base file with a bulk flow on
/// every pair of a 100 Mbit/s dumbbell (1,000 pairs: 0.06 CPU s, 10,000 pairs: 0.33 CPU s)
/// and experiments/scale/100k-flows.toml (2.17 CPU s): after the link packets at 200 ns,
/// 3.4, 5.6 and 3.0 µs per connection-second; budgeted at the high end.
pub const COST_PER_TCP_FLOW_SECOND_S: f64 = 6e-6;

/// Set-up, measured (`sojourn-bench scale`, docs/limits.md "Topology size"): a 10,000-pair
/// dumbbell (40,002 links) in 0.13 CPU s, ~3.2 µs per link; 1,000,000 flows in 0.67 s.
pub const COST_PER_LINK_SETUP_S: f64 = 3.5e-6;
pub const COST_PER_FLOW_SETUP_S: f64 = 1e-6;

/// CPU seconds per time-series row the run records (collected, converted to Arrow and
/// written to `timeseries.parquet`): `sojourn run` of a dumbbell with a bulk flow on every
/// pair, 100 Mbit/s, 20 s, every link recorded every 100 ms took 1.97 CPU s at 1,000 pairs
/// (7.2 M rows) and 9.18 s at 10,000 pairs (72 M rows): 80–92 ns per row beyond the
/// engine's and the front's share; budgeted at 100 ns.
pub const COST_PER_SERIES_ROW_S: f64 = 100e-9;

/// CPU seconds per logged packet (`[record] packets`), counted as the memory estimate
/// counts them (the link's rate in 1000-B packets): logging a saturated 1 Gbit/s bottleneck
/// for 10 s (826,000 packets of 1514 B) added 1.23 CPU s, 1.5 µs per packet logged, ~1 µs
/// per packet counted.
pub const COST_PER_LOGGED_PACKET_S: f64 = 1.5e-6;

/// The Python front's own share of a `sojourn run`: start-up with numpy and pyarrow,
/// writing summary.json and the Parquet files: 1.11 CPU s for a 0.1 s run of the
/// bad-input catalogue's base file.
pub const FRONT_CPU_S: f64 = 1.2;

/// Many flows make every packet dearer: each event touches per-flow state that no longer
/// fits in the cache. The per-packet cost is multiplied by flows / 25,000 when that is
/// above 1. Measured (`sojourn run` of the base file, 1 s, CBR flows of 5 Mbit/s each
/// into one 1 Gbit/s access link): 10,000 flows, 4.1 M packets sent, 208 ns per packet;
/// 100,000 flows, 41 M packets, 770 ns per packet.
pub const MANY_FLOWS: f64 = 25_000.0;

/// The CPU-time estimate of a run and what it comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuEstimate {
    /// Packets arriving at links per simulated second (carried or dropped there), summed
    /// over every link.
    pub link_packets_per_s: f64,
    /// TCP connections (one per flow entry) × the seconds each is active.
    pub tcp_flow_seconds: f64,
    /// Time-series rows and logged packets the run records ([`recorded_rows`]).
    pub series_rows: f64,
    pub logged_packets: f64,
    /// The whole estimate in CPU seconds.
    pub cpu_s: f64,
}

/// What one flow sends, averaged over the run: its data (bits per second, frame bytes)
/// and, for TCP, its ACKs (bits and packets per second on the reverse path).
struct FlowOffer {
    data_bps: f64,
    frame: f64,
    ack: Option<(f64, f64)>,
}

/// The packet rates the run offers, link by link ([`cpu_estimate`] and its tests).
struct Offers<'a> {
    exp: &'a Experiment,
    routes: crate::routing::Routes,
    rates: Vec<f64>,
    /// TCP connections crossing each link (they share it).
    sharing: Vec<u32>,
}

impl Offers<'_> {
    /// Calls `visit(path, reverse path, offer)` for every flow; returns the number of flows
    /// and the TCP connection-seconds.
    fn each_flow(&self, mut visit: impl FnMut(&[usize], &[usize], &FlowOffer)) -> (usize, f64) {
        let (exp, secs) = (self.exp, self.exp.duration.as_secs_f64());
        let (mut path, mut back) = (Vec::new(), Vec::new());
        let (mut flows, mut tcp_flow_seconds) = (0usize, 0.0);
        for w in &exp.workloads {
            let (start, stop) = match w {
                WorkloadPlan::Udp(u) => (u.start, u.stop),
                WorkloadPlan::Tcp(t) => (t.start, t.stop),
                WorkloadPlan::Probe(q) => (q.start, q.stop),
            };
            let stop = stop.unwrap_or(exp.duration).min(exp.duration);
            // The share of the run the workload is active: its rates are averaged over it.
            let active = if stop > start {
                (stop - start).as_secs_f64() / secs.max(1e-12)
            } else {
                0.0
            };
            for &(a, b) in &w.endpoints() {
                flows += 1;
                path.clear();
                back.clear();
                walk_route(exp, &self.routes, a, b, |l| path.push(l));
                let offer = match w {
                    WorkloadPlan::Udp(u) => {
                        let on = match u.onoff {
                            OnOff::Always => 1.0,
                            OnOff::Exponential { on, off } | OnOff::Fixed { on, off } => {
                                let (on, off) = (on.as_secs_f64(), off.as_secs_f64());
                                on / (on + off).max(1e-12)
                            }
                        };
                        FlowOffer {
                            data_bps: u.rate_bps as f64 * on * active,
                            frame: u.packet_bytes as f64,
                            ack: None,
                        }
                    }
                    WorkloadPlan::Probe(q) => FlowOffer {
                        data_bps: q.packet_bytes as f64 * 8.0 / q.interval.as_secs_f64() * active,
                        frame: q.packet_bytes as f64,
                        ack: None,
                    },
                    WorkloadPlan::Tcp(t) => {
                        // What the path lets a TCP flow have: its narrowest link, shared
                        // among the TCP connections crossing it.
                        let path_bps = path
                            .iter()
                            .map(|&l| self.rates[l] / f64::from(self.sharing[l].max(1)))
                            .fold(f64::INFINITY, f64::min);
                        let frame = (t.cfg.mtu + ETHERNET_HEADER_BYTES) as f64;
                        let per_flow_rate = transfers_of(exp, t).1 / t.flows.len().max(1) as f64;
                        let wire = |bytes: f64| 8.0 * transfer_wire_bytes(bytes, &t.cfg, 0);
                        let bps = match &t.kind {
                            TcpKind::Bulk => path_bps,
                            TcpKind::Transfer { size } => {
                                wire(*size as f64) / (secs * active).max(1e-9)
                            }
                            TcpKind::Poisson { size, .. } | TcpKind::Actors { size, .. } => {
                                per_flow_rate * wire(size.mean())
                            }
                            TcpKind::RequestResponse {
                                request, response, ..
                            } => per_flow_rate * wire(request.mean() + response.mean()),
                            TcpKind::Thin {
                                message, interval, ..
                            } => {
                                let per_s = 1.0 / interval.mean().as_secs_f64().max(1e-9);
                                per_s * 8.0 * (*message as f64 + frame - t.cfg.mss as f64)
                            }
                            TcpKind::App(a) => 8.0 * a.offered_bytes_per_s(),
                        }
                        .min(path_bps)
                            * active;
                        let ack = if matches!(&t.kind, TcpKind::Thin { udp: true, .. }) {
                            None
                        } else {
                            tcp_flow_seconds += secs * active;
                            walk_route(exp, &self.routes, b, a, |l| back.push(l));
                            let ts = if t.cfg.timestamps {
                                TIMESTAMP_OPTION_BYTES
                            } else {
                                0
                            };
                            let ack_frame =
                                (IP_TCP_HEADER_BYTES + ETHERNET_HEADER_BYTES + ts) as f64;
                            // One ACK per two full segments (Linux's delayed ACK).
                            let acks_pps = bps / 8.0 / frame / 2.0;
                            Some((acks_pps * ack_frame * 8.0, acks_pps))
                        };
                        FlowOffer {
                            data_bps: bps,
                            frame,
                            ack,
                        }
                    }
                };
                visit(&path, &back, &offer);
            }
        }
        (flows, tcp_flow_seconds)
    }
}

/// The CPU time `exp` will take to simulate ([`CpuEstimate`]).
pub fn cpu_estimate(exp: &Experiment) -> CpuEstimate {
    let secs = exp.duration.as_secs_f64();
    let n = exp.links.len();
    let (per_link, flows, tcp_flow_seconds) = offered_arrivals(exp);
    let arrivals: f64 = per_link.iter().sum();
    let (series_rows, logged_packets) = recorded_rows(exp, flows);
    let per_packet = COST_PER_LINK_PACKET_S * (flows as f64 / MANY_FLOWS).max(1.0);
    let cpu_s = arrivals * secs * per_packet
        + tcp_flow_seconds * COST_PER_TCP_FLOW_SECOND_S
        + series_rows * COST_PER_SERIES_ROW_S
        + logged_packets * COST_PER_LOGGED_PACKET_S
        + n as f64 * COST_PER_LINK_SETUP_S
        + flows as f64 * COST_PER_FLOW_SETUP_S
        + FRONT_CPU_S;
    CpuEstimate {
        link_packets_per_s: arrivals,
        tcp_flow_seconds,
        series_rows,
        logged_packets,
        cpu_s,
    }
}

/// The packets per simulated second arriving at each link (carried or dropped there),
/// as [`cpu_estimate`] counts them (the simulator's thread planner weighs partitions by
/// them).
pub fn link_arrivals_per_s(exp: &Experiment) -> Vec<f64> {
    offered_arrivals(exp).0
}

/// Per link, the packets per second arriving there; the number of flows; the TCP
/// connection-seconds.
fn offered_arrivals(exp: &Experiment) -> (Vec<f64>, usize, f64) {
    let n = exp.links.len();
    let routes = static_routes(exp);
    let rates: Vec<f64> = exp
        .links
        .iter()
        .map(|l| l.rate.mean_bps(exp.duration))
        .collect();
    // TCP connections share each link they cross: count them first, so a bulk flow gets
    // its fair share of its path's narrowest link, not the whole link (1,000 bulk flows
    // through one 100 Mbit/s bottleneck carry 100 Mbit/s between them).
    let mut sharing = vec![0u32; n];
    for w in &exp.workloads {
        if let WorkloadPlan::Tcp(t) = w {
            if !matches!(t.kind, TcpKind::Thin { udp: true, .. }) {
                for &(a, b) in &t.flows {
                    walk_route(exp, &routes, a, b, |l| sharing[l] += 1);
                }
            }
        }
    }
    let offers = Offers {
        exp,
        routes,
        rates,
        sharing,
    };
    // First the bits offered to each link, each flow cut by the links before it on its
    // own path; then the share of what arrives that each link lets through.
    let mut offered_bps = vec![0.0f64; n];
    offers.each_flow(|path, back, f| {
        let mut bps = f.data_bps;
        for &l in path {
            offered_bps[l] += bps;
            bps = bps.min(offers.rates[l]);
        }
        if let Some((ack_bps, _)) = f.ack {
            for &l in back {
                offered_bps[l] += ack_bps;
            }
        }
    });
    let passes: Vec<f64> = offered_bps
        .iter()
        .zip(&offers.rates)
        .map(|(&o, &r)| if o > r { r / o } else { 1.0 })
        .collect();
    // Then the packets arriving at each link (carried or dropped there: both cost an
    // enqueue), each flow thinned by what the links before it dropped.
    let mut arrivals = vec![0.0f64; n];
    let (flows, tcp_flow_seconds) = offers.each_flow(|path, back, f| {
        let mut pps = f.data_bps / 8.0 / f.frame;
        for &l in path {
            arrivals[l] += pps;
            pps *= passes[l];
        }
        if let Some((_, ack_pps)) = f.ack {
            let mut pps = ack_pps;
            for &l in back {
                arrivals[l] += pps;
                pps *= passes[l];
            }
        }
    });
    (arrivals, flows, tcp_flow_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate for a dumbbell of `pairs` pairs (12 Mbit/s bottleneck, 1 Gbit/s access
    /// links, the default recording) running `workload` (the entry's keys) for `duration`.
    fn estimate(pairs: u32, duration: &str, workload: &str) -> CpuEstimate {
        let text = format!(
            "duration = \"{duration}\"\n[topology]\nkind = \"dumbbell\"\npairs = {pairs}\nbottleneck = {{ rate = \"12Mbit\", delay = \"5ms\" }}\naccess = {{ rate = \"1Gbit\", delay = \"1ms\" }}\n[[workload]]\n{workload}\n"
        );
        cpu_estimate(&crate::from_toml(&text, std::path::Path::new(".")).unwrap())
    }

    const CBR_1M2: &str = "kind = \"cbr\"\nrate = \"1.2Mbit\"\npacket_size = \"1500B\"";
    /// A bulk flow's 12 Mbit/s of 1514-B frames (MTU 1500 + 14) on 3 links, and half as
    /// many ACKs on the 3 reverse links.
    const BULK_LINK_PACKETS: f64 = 3.0 * 1.5 * 12e6 / 8.0 / 1514.0;

    #[test]
    fn cbr_below_the_bottleneck_crosses_three_links() {
        // 1.2 Mbit/s of 1500-B frames: 100 packets/s over s0.up, bottleneck, d0.down.
        let c = estimate(1, "10s", CBR_1M2);
        assert!((c.link_packets_per_s - 300.0).abs() < 1e-6, "{c:?}");
        assert_eq!(c.tcp_flow_seconds, 0.0);
    }

    #[test]
    fn cbr_above_the_bottleneck_is_cut_to_its_rate() {
        // 24 Mbit/s offered, 12 Mbit/s carried past the bottleneck: 2000 packets/s arrive
        // at the access link and at the bottleneck (which drops half), 1000 at the far
        // access link.
        let c = estimate(1, "10s", &CBR_1M2.replace("1.2Mbit", "24Mbit"));
        assert!((c.link_packets_per_s - 5000.0).abs() < 1e-6, "{c:?}");
    }

    #[test]
    fn bulk_flows_run_at_their_share_of_the_bottleneck_with_acks_back() {
        // One bulk flow has the bottleneck to itself; ten on ten pairs get 1.2 Mbit/s each
        // on their own access links and 12 Mbit/s together on the bottleneck: the same link
        // packets as one flow alone, ten times the connection-seconds.
        for (pairs, workload, flow_seconds) in [
            (1, "kind = \"bulk\"", 10.0),
            (10, "kind = \"bulk\"\npairs = \"all\"", 100.0),
        ] {
            let c = estimate(pairs, "10s", workload);
            let err = (c.link_packets_per_s - BULK_LINK_PACKETS).abs();
            assert!(err < 1e-6, "{pairs} pairs: {c:?}");
            assert_eq!(c.tcp_flow_seconds, flow_seconds);
        }
    }

    #[test]
    fn a_million_hours_of_a_slow_cbr_is_days_of_cpu() {
        let c = estimate(1, "1000000h", CBR_1M2);
        // 300 link packets/s × 3.6e9 s × 200 ns = 216,000 CPU s; the default recording,
        // 9 series on each of the 6 links every 100 ms: 1.944e12 rows × 100 ns = 194,400 s;
        // the front's 1.2 s and a few µs of set-up: 4.75 days.
        assert_eq!(c.series_rows, 1.944e12);
        assert!(c.cpu_s > 410_401.0 && c.cpu_s < 410_402.0, "{c:?}");
    }
}
