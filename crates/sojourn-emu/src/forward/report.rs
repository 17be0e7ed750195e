//! What a run of the forwarder reports ([`ForwarderReport`]): per port, per link, per
//! connection, and the conservation identity that ties them together.

use sojourn_core::hist::Histogram;
use sojourn_core::qdisc::DropReason;
use sojourn_core::FlowKey;
use sojourn_record::metrics::{PacketLog, TimeSeries};

/// Frames the forwarder dropped before any link took them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngressDrops {
    /// Not IPv4/IPv6 (ARP, LLDP…): the emulated path carries IP only.
    pub not_ip: u64,
    /// No route for the destination.
    pub unroutable: u64,
    /// Longer than `max_frame_bytes` (e.g. a GSO/GRO buffer: offloads must be off).
    pub oversize: u64,
    /// Every buffer in use.
    pub no_buffer: u64,
}

/// TCP handshake segments the forwarder received, by what they say about ECN
/// ([`wire::ecn_setup`](crate::wire::ecn_setup)); index = [`wire::EcnSetup`](crate::wire::EcnSetup) as usize (None, Ecn, AccEcn, Other).
/// Retransmitted SYNs count again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EcnHandshakes {
    pub syn: [u64; 4],
    pub syn_ack: [u64; 4],
}

/// Per-port counters.
#[derive(Clone, Debug, Default)]
pub struct PortReport {
    pub ifname: String,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames the kernel refused on send (e.g. ENOBUFS: the receiver's backlog was full).
    pub tx_errors: u64,
    /// Frames the kernel dropped before the forwarder read them (its socket's receive
    /// buffer was full: `PACKET_STATISTICS` `tp_drops`). Not in `rx_frames`: they never
    /// reached the forwarder, so they are outside its conservation identity.
    pub rx_kernel_drops: u64,
    /// GSO buffers received (more than one segment; GSO mode only).
    pub rx_gso_buffers: u64,
}

/// Per-link counters; `received = delivered + dropped + queued_at_end`.
#[derive(Clone, Debug, Default)]
pub struct LinkReport {
    pub name: String,
    pub qdisc: String,
    pub received_pkts: u64,
    pub received_bytes: u64,
    /// Released at the far end (to a port or the next link), in frames (a GSO buffer is
    /// one, as `tc` counts it) and bytes on the wire (every segment with its headers).
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    /// The wire packets of the delivered frames (a GSO buffer's segments; = frames with
    /// MTU frames).
    pub delivered_segs: u64,
    /// By [`DropReason`] (index = `reason as usize`); qdisc drops and link loss.
    pub drops: [u64; DropReason::COUNT],
    /// In the qdisc, being serialised or propagating when the run stopped.
    pub queued_at_end: u64,
    /// CE marks the qdisc applied (its own count).
    pub ecn_marks: u64,
    /// CE codepoints written into real IP headers (ECT → CE).
    pub ce_written: u64,
    /// Qdisc sojourn (dequeue − enqueue) of every packet dequeued in the measured period
    /// ([`Plan::measure_from`](super::Plan::measure_from)..[`Plan::measure_until`](super::Plan::measure_until)), ns.
    pub sojourn_ns: Histogram,
    /// Counters of the measured period only.
    pub measured: Measured,
    /// How late each release happened versus its due time, ns (timer + scheduling
    /// error of this thread: the delay accuracy).
    pub release_late_ns: Histogram,
}

impl LinkReport {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// A link's counters over the measured period ([`Plan::measure_from`](super::Plan::measure_from) to
/// [`Plan::measure_until`](super::Plan::measure_until); the whole run without them), as the simulator's link counters
/// after its warm-up reset.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Start and end of the period, ns from the epoch (`until_ns` = the stop if the run
    /// stopped before `measure_until`).
    pub since_ns: u64,
    pub until_ns: u64,
    /// Released at the far end in the period (frames, wire bytes, wire packets).
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    pub delivered_segs: u64,
    /// Drops in the period, by [`DropReason`].
    pub drops: [u64; DropReason::COUNT],
    /// CE marks the qdisc made in the period.
    pub ecn_marks: u64,
}

/// Per connection (5-tuple, both directions; a SYN after the connection closed starts a
/// new one, as conntrack does) what the forwarder saw, indexed by its connection id.
#[derive(Clone, Debug)]
pub struct ConnReport {
    /// The original direction (the first packet's).
    pub key: FlowKey,
    /// When its first packet arrived, ns from the epoch.
    pub first_ns: u64,
    /// Packets of the connection dropped on any link, in its original direction and in
    /// the reply direction (TCP segments: a dropped GSO buffer counts all of its own).
    pub drops_original: u64,
    pub drops_reply: u64,
}

/// One time series sample of one link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub t_ns: u64,
    pub link: usize,
    pub qlen_pkts: u64,
    pub qlen_bytes: u64,
    /// Cumulative since the start (differences give throughput).
    pub delivered_bytes: u64,
    pub delivered_pkts: u64,
    pub dropped_pkts: u64,
}

/// What a run of the forwarder did.
#[derive(Clone, Debug, Default)]
pub struct ForwarderReport {
    /// CLOCK_MONOTONIC ns of time 0.
    pub epoch_monotonic_ns: u64,
    /// Run time, ns from the epoch to the stop.
    pub duration_ns: u64,
    /// CPU time of the forwarder thread, ns.
    pub cpu_ns: u64,
    pub ports: Vec<PortReport>,
    pub links: Vec<LinkReport>,
    pub ingress_drops: IngressDrops,
    pub samples: Vec<Sample>,
    /// Frames released to a port but still waiting for the socket when stopped.
    pub unsent_at_end: u64,
    /// The first socket error, if the thread stopped on one.
    pub error: Option<String>,
    /// Whether the thread ran under SCHED_FIFO.
    pub realtime: bool,
    /// Work time of each loop iteration (receive, advance, release, send), ns.
    pub busy_ns: Histogram,
    /// How much later than asked each timed sleep ended, ns (timer + scheduler error).
    pub oversleep_ns: Histogram,
    /// The links' time series ([`Plan::series_links`](super::Plan::series_links)) in every engine's metrics, at
    /// multiples of the sample interval.
    pub series: TimeSeries,
    /// The packet log of [`Plan::packet_log_links`](super::Plan::packet_log_links) (every engine's schema; `flow` is
    /// 2 × the connection id of [`ForwarderReport::conns`](super::ForwarderReport::conns) + 1 in the reply direction,
    /// `uid` the packet's number).
    pub packets: PacketLog,
    /// Every connection seen, by connection id.
    pub conns: Vec<ConnReport>,
    /// The ECN negotiation seen in the handshakes' real headers.
    pub ecn_handshakes: EcnHandshakes,
}

/// Releases later than this at the 99th percentile mean the forwarder fell behind its
/// links: on this VM a keeping-up forwarder's p99 is 40–110 µs, under heavy machine load
/// a few hundred µs (docs/emulate.md "Timing").
pub const BEHIND_RELEASE_P99_NS: f64 = 1_000_000.0;

/// The one-line warning of a run that exceeded what the live engine holds on this
/// machine, from its `evidence` (the forwarder's [`ForwarderReport::behind`], the load
/// generator's sources that fell behind), or `None` without any. What the run measured
/// beyond that point is the machine's limit, not the emulated network's.
pub fn limit_warning(evidence: &[String]) -> Option<String> {
    if evidence.is_empty() {
        return None;
    }
    Some(format!(
        "this run exceeded what the live engine holds on this machine ({}): rates, drops \
         and delays beyond that are not the emulated network's (docs/emulate.md \
         \"Forwarder throughput\" has the measured limit: 1 Gbit/s of MTU frames through \
         one link, 1.2 Gbit/s offered, on this project's 2-vCPU VM)",
        evidence.join("; ")
    ))
}

impl ForwarderReport {
    /// What shows that the forwarder could not keep up with the run: frames the kernel
    /// dropped before the forwarder read them, links whose releases were more than
    /// [`BEHIND_RELEASE_P99_NS`] late at the 99th percentile. Empty when it kept up.
    pub fn behind(&self) -> Vec<String> {
        let mut why = vec![];
        let kernel: u64 = self.ports.iter().map(|p| p.rx_kernel_drops).sum();
        if kernel > 0 {
            why.push(format!(
                "the kernel dropped {kernel} frames before the forwarder read them"
            ));
        }
        for l in &self.links {
            if let Some(p99) = l.release_late_ns.quantile(0.99) {
                if p99 > BEHIND_RELEASE_P99_NS {
                    why.push(format!(
                        "link {} released its packets {:.1} ms late at the 99th percentile",
                        l.name,
                        p99 * 1e-6
                    ));
                }
            }
        }
        why
    }

    /// Every frame received is accounted for: sent, refused by the kernel, dropped by
    /// the forwarder with a reason, or still inside at the end. Checked over the whole
    /// forwarder and per link.
    pub fn check_conservation(&self) -> Result<(), String> {
        for l in &self.links {
            let out = l.delivered_pkts + l.dropped() + l.queued_at_end;
            if l.received_pkts != out {
                return Err(format!(
                    "link {}: received {} ≠ delivered {} + dropped {} + queued {}",
                    l.name,
                    l.received_pkts,
                    l.delivered_pkts,
                    l.dropped(),
                    l.queued_at_end
                ));
            }
        }
        let rx: u64 = self.ports.iter().map(|p| p.rx_frames).sum();
        let tx: u64 = self.ports.iter().map(|p| p.tx_frames + p.tx_errors).sum();
        let d = &self.ingress_drops;
        let fwd = d.not_ip + d.unroutable + d.oversize + d.no_buffer;
        let link_drops: u64 = self.links.iter().map(|l| l.dropped()).sum();
        let queued: u64 = self.links.iter().map(|l| l.queued_at_end).sum();
        if rx != tx + fwd + link_drops + queued + self.unsent_at_end {
            return Err(format!(
                "forwarder: received {rx} ≠ sent {tx} + ingress drops {fwd} + link drops \
                 {link_drops} + queued {queued} + unsent {}",
                self.unsent_at_end
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(kernel_drops: u64, late_ns: &[u64]) -> ForwarderReport {
        let mut l = LinkReport {
            name: "bottleneck".into(),
            ..Default::default()
        };
        for &x in late_ns {
            l.release_late_ns.record(x);
        }
        ForwarderReport {
            ports: vec![PortReport {
                rx_kernel_drops: kernel_drops,
                ..Default::default()
            }],
            links: vec![l],
            ..Default::default()
        }
    }

    /// Releases 80 µs late (a keeping-up forwarder at 1 Gbit/s here) and no kernel drops:
    /// no warning; 2 ms late at the 99th percentile, or a frame the kernel dropped before
    /// the forwarder read it: one line naming the evidence.
    #[test]
    fn the_warning_names_what_shows_the_forwarder_fell_behind() {
        assert!(report(0, &[80_000; 100]).behind().is_empty());
        assert_eq!(limit_warning(&report(0, &[80_000; 100]).behind()), None);
        let late = limit_warning(&report(0, &[2_000_000; 100]).behind()).expect("late releases");
        assert!(
            late.contains(
                "(link bottleneck released its packets 2.0 ms late at the 99th percentile)"
            ),
            "{late}"
        );
        assert!(!late.contains('\n'));
        let dropped = report(7, &[80_000; 100]).behind();
        assert_eq!(
            dropped,
            vec!["the kernel dropped 7 frames before the forwarder read them".to_string()]
        );
    }
}
