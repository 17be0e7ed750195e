//! Latency probes and isochronous streams (`kind = "ping"`, `kind = "isochronous"`):
//! small packets at a fixed interval whose every delay is recorded (probes.parquet,
//! docs/tests.md).
//!
//! * `ping` with `protocol = "icmp"` (default) is an ICMP echo: the far end answers each
//!   request at once with a reply of the same size, and only the round-trip time is known
//!   to the sender (as with ping(8), which Flent runs every 0.2 s);
//! * `ping` with `protocol = "udp"` is an irtt-like UDP round trip: the reply carries the
//!   far end's receive time, so both one-way delays are recorded as well (the engines'
//!   clocks are one clock, so there is no offset to remove);
//! * `isochronous` is a one-way stream (VoIP, gaming): one datagram every `interval`,
//!   whose one-way delay is recorded at the receiver; nothing comes back.
//!
//! Sizes are frame lengths as a qdisc sees them (Ethernet header included), like `cbr`'s
//! `packet_size`.

use sojourn_core::params::{ConfResult, Params};
use sojourn_core::Duration;

/// What a probe workload sends and what comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeMode {
    /// ICMP echo request/reply: round-trip time only.
    Icmp,
    /// UDP request/reply carrying the far end's receive time: RTT and both one-way delays.
    Udp,
    /// One-way UDP stream: the receiver records each datagram's one-way delay.
    OneWay,
}

impl ProbeMode {
    /// The name probes.parquet's `mode` column uses.
    pub fn name(self) -> &'static str {
        match self {
            ProbeMode::Icmp => "icmp",
            ProbeMode::Udp => "udp",
            ProbeMode::OneWay => "oneway",
        }
    }
}

/// A latency-probe or isochronous-stream workload.
#[derive(Clone, Debug)]
pub struct ProbePlan {
    pub index: u32,
    /// (source, destination) per flow: the source sends, the destination answers (or,
    /// one way, receives).
    pub flows: Vec<(u32, u32)>,
    pub mode: ProbeMode,
    /// Time between two sends (a fixed schedule from `start`: a late or lost answer never
    /// delays the next probe, as with `ping -i` and irtt).
    pub interval: Duration,
    /// Frame length of a request (and of its reply).
    pub packet_bytes: u32,
    pub start: Duration,
    pub stop: Option<Duration>,
    pub dscp: u8,
}

/// The probe kinds [`parse`] handles.
pub const PROBE_KINDS: &[&str] = &["ping", "isochronous"];

/// ping(8)'s default request: 56 data bytes + 8 B ICMP header + 20 B IPv4 header + 14 B
/// Ethernet header.
pub const PING_FRAME_BYTES: u64 = 98;

/// Flent's default sampling step (its `--step-size`), which it also passes to ping as the
/// interval: 0.2 s.
pub const FLENT_STEP: Duration = Duration::from_ms(200);

/// What an isochronous stream without `interval` / `packet_size` is told.
const INTERVAL_HINT: &str = "time between datagrams, e.g. \"20ms\"";
const SIZE_HINT: &str = "frame bytes per datagram, e.g. \"214B\"";

/// Parses a `ping` or `isochronous` workload whose endpoints `flows` workload.rs has read
/// (it owns the endpoint keys every kind shares; this module imports nothing from it).
pub fn parse(
    p: &mut Params,
    index: u32,
    kind: &str,
    flows: Vec<(u32, u32)>,
) -> ConfResult<ProbePlan> {
    let iso = kind == "isochronous";
    let mode = if iso {
        ProbeMode::OneWay
    } else {
        match p.choice("protocol", &["icmp", "udp"], "icmp")? {
            "udp" => ProbeMode::Udp,
            _ => ProbeMode::Icmp,
        }
    };
    // An isochronous stream must say its rhythm; a probe defaults to Flent's step.
    let interval = p.duration_opt("interval")?;
    let interval = or_default(p, interval, iso, FLENT_STEP, "interval", INTERVAL_HINT)?;
    if interval < Duration::from_us(100) {
        return Err(p.err(
            "interval",
            "must be at least 100us (a probe is a sample, not a load)",
        ));
    }
    let size = p.bytes_opt("packet_size")?;
    let packet_bytes = or_default(p, size, iso, PING_FRAME_BYTES, "packet_size", SIZE_HINT)?;
    // The smallest frame that holds Ethernet (14 B) + IPv4 (20 B) + UDP/ICMP (8 B) headers.
    if !(42..=1514).contains(&packet_bytes) {
        return Err(p.err(
            "packet_size",
            format!("{packet_bytes} B is outside 42..1514 B (frame length incl. the 14-B Ethernet header)"),
        ));
    }
    let start = p.duration("start", Duration::ZERO)?;
    let stop = p.duration_opt("stop")?;
    if let Some(s) = stop {
        if s <= start {
            return Err(p.err("stop", "must be after `start`"));
        }
    }
    let dscp = p.u32("dscp", 0, 0, 63)? as u8;
    Ok(ProbePlan {
        index,
        flows,
        mode,
        interval,
        packet_bytes: packet_bytes as u32,
        start,
        stop,
        dscp,
    })
}

/// `value`, else (a probe) `default`, else (an isochronous stream, `required`) an error
/// naming `key` with `hint`.
fn or_default<T>(
    p: &Params,
    value: Option<T>,
    required: bool,
    default: T,
    key: &str,
    hint: &str,
) -> ConfResult<T> {
    match value {
        Some(v) => Ok(v),
        None if required => Err(p.err(key, format!("required ({hint})"))),
        None => Ok(default),
    }
}
