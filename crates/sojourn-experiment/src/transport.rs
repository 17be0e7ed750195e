//! Transport settings of an experiment: the `[transport]` table and its per-workload
//! overrides (docs/transport.md). Only the settings live here; the TCP machinery that
//! honours them is engine business (sojourn-sim's `tcp`).

use crate::dist::IntervalDist;
use sojourn_core::params::{ConfResult, Params, Table, Value};
use sojourn_core::Duration;

/// A congestion-control algorithm by name (Linux `net.ipv4.tcp_congestion_control`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcKind {
    NewReno,
    Cubic,
    Bbr,
    Vegas,
    /// DCTCP (RFC 8257, Linux `tcp_dctcp`).
    Dctcp,
    /// TCP Prague (draft-briscoe-iccrg-prague-congestion-control): DCTCP's response,
    /// ECT(1), paced.
    Prague,
}

impl CcKind {
    /// Accepted names (`reno` is Linux's name for NewReno).
    pub const NAMES: &'static [&'static str] = &[
        "newreno", "reno", "cubic", "bbr", "vegas", "dctcp", "prague",
    ];

    pub fn parse(s: &str) -> Option<CcKind> {
        Some(match s {
            "newreno" | "reno" => CcKind::NewReno,
            "cubic" => CcKind::Cubic,
            "bbr" => CcKind::Bbr,
            "vegas" => CcKind::Vegas,
            "dctcp" => CcKind::Dctcp,
            "prague" => CcKind::Prague,
            _ => return None,
        })
    }

    /// The canonical name (as in the output's `cc` column).
    pub fn name(self) -> &'static str {
        match self {
            CcKind::NewReno => "newreno",
            CcKind::Cubic => "cubic",
            CcKind::Bbr => "bbr",
            CcKind::Vegas => "vegas",
            CcKind::Dctcp => "dctcp",
            CcKind::Prague => "prague",
        }
    }

    /// Linux `TCP_CONG_NEEDS_ECN`: the algorithm negotiates ECN whatever `ecn` says.
    pub fn needs_ecn(self) -> bool {
        matches!(self, CcKind::Dctcp | CcKind::Prague)
    }
}

/// IPv4 (20) + TCP (20) header bytes.
pub const IP_TCP_HEADER_BYTES: u32 = 40;
/// The TCP timestamps option as Linux sends it (NOP, NOP, kind 8, length 10).
pub const TIMESTAMP_OPTION_BYTES: u32 = 12;
pub const ETHERNET_HEADER_BYTES: u32 = 14;
/// A Linux SYN / SYN-ACK frame: 20 IP + 20 TCP + 20 options (MSS, SACK-permitted,
/// timestamps, window scale) + 14 Ethernet.
pub const SYN_FRAME_BYTES: u32 = 74;
/// The destination port of every connection (iperf3's).
pub const SERVER_PORT: u16 = 5201;
/// IPv4 (20) + UDP (8) + Ethernet (14) header bytes in front of a UDP payload: a UDP
/// workload's `packet_bytes` is the frame, its payload this much less.
pub const UDP_OVERHEAD_BYTES: u32 = 42;

/// Transport settings: `[transport]` defaults, overridable per workload with the same keys.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpConfig {
    pub cc: CcKind,
    /// Initial window in segments (Linux `TCP_INIT_CWND` = 10; 3 for the ns-2 papers).
    pub initial_window: u32,
    /// DSCP both ends mark their packets with (`IP_TOS` set on both sockets, as netperf's
    /// `-Y local,remote` does for Flent's rrul; 0 = best effort).
    pub dscp: u8,
    /// IP MTU (bytes); the default MSS derives from it.
    pub mtu: u32,
    /// Payload bytes per full segment (1500 − 40 − 12 = 1448 with timestamps).
    pub mss: u32,
    /// TCP timestamps option on every segment (12 bytes; Linux default on).
    pub timestamps: bool,
    /// ECN feedback requested on the SYN (RFC 3168). `ecn = "accecn"` sets this and
    /// [`TcpConfig::accecn`].
    pub ecn: bool,
    /// Accurate ECN feedback (RFC 9768, `ecn = "accecn"`): requested on the SYN, granted by
    /// a receiver that has it, classic ECN otherwise.
    pub accecn: bool,
    pub delayed_ack: bool,
    pub delack_min: Duration,
    pub sack: bool,
    /// Receive window in bytes (the application reads at once).
    pub rwnd_bytes: u64,
    pub min_rto: Duration,
    pub initial_rto: Duration,
    pub handshake: bool,
    /// Pace every algorithm at Linux's `sk_pacing_rate` (BBR always paces).
    pub pacing: bool,
    pub tlp: bool,
    /// RFC 6675 DupThresh (Linux `tcp_reordering` = 3).
    pub dupthresh: u32,
    /// TCP Small Queues on the sending host (Linux: always on).
    pub tsq: bool,
    /// Linux `tcp_limit_output_bytes`: the TSQ cap for unpaced sockets (4 MiB since 6.16).
    pub tsq_limit_output_bytes: u64,
    /// Generic segmentation offload: hand the host qdisc buffers of several segments
    /// (Linux always does for TCP since 4.19, whatever the device's offloads).
    pub gso: bool,
    /// `sk_gso_max_size` (the device's `gso_max_size`, 64 KiB for veth and most NICs).
    pub gso_max_bytes: u32,
    /// TCP Prague's RTT independence (`prague_rtt_scaling = "rate"`, Linux tcp_prague's
    /// `RTT_CONTROL_RATE`): below `prague_rtt_target` the additive increase per RTT is
    /// (RTT/target)², the rate growth of a flow whose RTT is the target.
    pub prague_rtt_scaling: bool,
    /// The reference RTT of RTT independence (tcp_prague `prague_rtt_target`, 25 ms).
    pub prague_rtt_target: Duration,
    /// The receiving application's wake-up latency (`reader_wakeup`): how long after data
    /// arrives the reader runs and reads it (and Linux sends the every-second-segment ACK
    /// it held back, `tcp_cleanup_rbuf`). `None`: it reads at once.
    pub reader_wakeup: Option<IntervalDist>,
    /// The receiving application's pauses (`reader_pause`): now and then it is not scheduled
    /// at all for a while (another task, the hypervisor), and data that arrives meanwhile
    /// is read, and its ACK sent, when the pause ends. `None`: no pauses.
    pub reader_pause: Option<Box<ReaderPause>>,
    /// IPv6 instead of IPv4 (`ip = 6`): a 40-byte IP header (RFC 8200 §3) instead of 20,
    /// so the default MSS is MTU − 60 − options (1428 with timestamps at 1500 B).
    pub ipv6: bool,
}

/// What an IPv6 header adds to an IPv4 one without options (RFC 8200 §3: 40 B vs 20 B).
pub const IPV6_EXTRA_HEADER_BYTES: u32 = 20;

/// TCP Prague's reference RTT for RTT independence (draft-briscoe-iccrg-prague-congestion-control
/// §2.3.4; tcp_prague's `prague_rtt_target` = 25 000 µs).
pub const PRAGUE_RTT_TARGET: Duration = Duration(25_000_000);

/// Linux `GSO_LEGACY_MAX_SIZE`, the default `gso_max_size` of a device.
pub const GSO_MAX_BYTES: u32 = 65_536;

/// Linux `tcp_limit_output_bytes` default since 6.16 (commit "tcp: increase
/// tcp_limit_output_bytes default value to 4MB"); 1 MiB from 4.20 to 6.15.
pub const TCP_LIMIT_OUTPUT_BYTES: u64 = 4 << 20;

impl Default for TcpConfig {
    fn default() -> TcpConfig {
        TcpConfig {
            cc: CcKind::Cubic,
            initial_window: 10,
            dscp: 0,
            mtu: 1500,
            mss: 1448,
            timestamps: true,
            ecn: false,
            accecn: false,
            delayed_ack: true,
            delack_min: Duration::from_ms(40),
            sack: true,
            rwnd_bytes: 6 * 1024 * 1024,
            min_rto: Duration::from_ms(200),
            initial_rto: Duration::from_ms(1000),
            handshake: true,
            pacing: false,
            tlp: true,
            dupthresh: 3,
            tsq: true,
            tsq_limit_output_bytes: TCP_LIMIT_OUTPUT_BYTES,
            gso: true,
            gso_max_bytes: GSO_MAX_BYTES,
            ipv6: false,
            prague_rtt_scaling: false,
            prague_rtt_target: PRAGUE_RTT_TARGET,
            reader_wakeup: None,
            reader_pause: None,
        }
    }
}

/// Pauses of the receiving application (`reader_pause = { every, length }`): a pause
/// starts `every` after the previous one ended (a plain duration is the mean of
/// exponential gaps, i.e. pauses at Poisson times) and lasts `length` (a plain duration is
/// fixed); either may be a distribution table as `reader_wakeup` takes.
#[derive(Clone, Debug, PartialEq)]
pub struct ReaderPause {
    pub every: IntervalDist,
    pub length: IntervalDist,
}

impl ReaderPause {
    fn parse(p: &mut Params, key: &str) -> ConfResult<Option<Box<ReaderPause>>> {
        let path = p.key_path(key);
        let t = match p.raw(key) {
            None => return Ok(None),
            Some(Value::Table(t)) => t.clone(),
            Some(v) => {
                return Err(sojourn_core::params::ConfError::new(
                    path,
                    format!(
                        "expected a table {{ every = \"7s\", length = \"2ms\" }}, got {}",
                        v.type_name()
                    ),
                ))
            }
        };
        let mut q = Params::new(path, &t);
        let every = IntervalDist::parse(&mut q, "every", true)?;
        let length = IntervalDist::parse(&mut q, "length", false)?;
        let every = every.ok_or_else(|| q.err("every", "required"))?;
        let length = length.ok_or_else(|| q.err("length", "required"))?;
        q.finish()?;
        Ok(Some(Box::new(ReaderPause { every, length })))
    }
}

impl TcpConfig {
    /// A SYN or SYN-ACK frame: [`SYN_FRAME_BYTES`] over IPv4, 20 B more over IPv6.
    pub fn syn_frame_bytes(&self) -> u32 {
        SYN_FRAME_BYTES
            + if self.ipv6 {
                IPV6_EXTRA_HEADER_BYTES
            } else {
                0
            }
    }

    /// IP and TCP headers without options: 40 B over IPv4, 60 B over IPv6.
    pub fn ip_tcp_header_bytes(&self) -> u32 {
        IP_TCP_HEADER_BYTES
            + if self.ipv6 {
                IPV6_EXTRA_HEADER_BYTES
            } else {
                0
            }
    }

    /// ECN in use on this connection: `ecn`, or an algorithm that needs it (DCTCP and
    /// Prague negotiate ECN regardless of the sysctl, Linux `tcp_ca_needs_ecn`).
    pub fn ecn_enabled(&self) -> bool {
        self.ecn || self.cc.needs_ecn()
    }

    /// Bytes in front of the payload in a frame as a qdisc sees it.
    pub fn header_bytes(&self) -> u32 {
        self.ip_tcp_header_bytes()
            + if self.timestamps {
                TIMESTAMP_OPTION_BYTES
            } else {
                0
            }
            + ETHERNET_HEADER_BYTES
    }

    /// Reads every transport key present in `p`, starting from `self`.
    pub fn overridden(&self, p: &mut Params) -> ConfResult<TcpConfig> {
        let mut c = self.clone();
        if let Some(s) = p.str_opt("cc")? {
            c.cc = CcKind::parse(s).ok_or_else(|| {
                p.err(
                    "cc",
                    format!(
                        "unknown congestion control {s:?}; known: {}",
                        CcKind::NAMES.join(", ")
                    ),
                )
            })?;
        }
        c.initial_window = p.u32("initial_window", c.initial_window, 1, 1000)?;
        c.dscp = p.u32("dscp", c.dscp as u32, 0, 63)? as u8;
        c.timestamps = p.bool("timestamps", c.timestamps)?;
        match p.u32("ip", if c.ipv6 { 6 } else { 4 }, 4, 6)? {
            4 => c.ipv6 = false,
            6 => c.ipv6 = true,
            _ => return Err(p.err("ip", "must be 4 (IPv4) or 6 (IPv6)")),
        }
        if let Some(mtu) = p.bytes_opt("mtu")? {
            if !(576..=65_535).contains(&mtu) {
                return Err(p.err("mtu", "must be between 576 B and 65535 B"));
            }
            c.mtu = mtu as u32;
        }
        if let Some(m) = p.bytes_opt("mss")? {
            if !(64..=65_000).contains(&m) {
                return Err(p.err("mss", "must be between 64 B and 65000 B"));
            }
            c.mss = m as u32;
        } else if p.has("mtu") || p.has("timestamps") || p.has("ip") {
            // RFC 879/6691: MSS = MTU − IP − TCP headers − the timestamps option.
            let opt = if c.timestamps {
                TIMESTAMP_OPTION_BYTES
            } else {
                0
            };
            c.mss = c.mtu - c.ip_tcp_header_bytes() - opt;
        }
        match p.raw("ecn") {
            None => {}
            Some(Value::Bool(b)) => (c.ecn, c.accecn) = (*b, false),
            Some(Value::Str(s)) if s == "ecn" => (c.ecn, c.accecn) = (true, false),
            Some(Value::Str(s)) if s == "accecn" => (c.ecn, c.accecn) = (true, true),
            Some(v) => {
                return Err(p.err(
                    "ecn",
                    format!(
                        "expected true, false, \"ecn\" (RFC 3168) or \"accecn\" (Accurate ECN, \
                         RFC 9768), got {}",
                        match v {
                            Value::Str(s) => format!("{s:?}"),
                            v => v.type_name().to_string(),
                        }
                    ),
                ))
            }
        }
        if let Some(s) = p.str_opt("prague_rtt_scaling")? {
            c.prague_rtt_scaling = match s {
                "none" => false,
                "rate" => true,
                _ => {
                    return Err(p.err(
                        "prague_rtt_scaling",
                        format!(
                            "unknown mode {s:?}; supported: \"none\", \"rate\" (tcp_prague's \
                             \"scalable\" and \"additive\" modes are not modelled)"
                        ),
                    ))
                }
            };
        }
        c.prague_rtt_target = p.duration("prague_rtt_target", c.prague_rtt_target)?;
        if c.prague_rtt_target.is_zero() {
            return Err(p.err(
                "prague_rtt_target",
                "must be positive (use prague_rtt_scaling = \"none\" to switch RTT independence off)",
            ));
        }
        if p.has("reader_wakeup") {
            // A plain duration is a fixed latency; "0" switches a file's latency off.
            let zero = matches!(p.raw("reader_wakeup"), Some(Value::Str(s))
                if sojourn_core::units::parse_duration(s).is_ok_and(|d| d.is_zero()));
            c.reader_wakeup = if zero {
                None
            } else {
                IntervalDist::parse(p, "reader_wakeup", false)?
            };
        }
        if p.has("reader_pause") {
            c.reader_pause = ReaderPause::parse(p, "reader_pause")?;
        }
        c.delayed_ack = p.bool("delayed_ack", c.delayed_ack)?;
        c.delack_min = p.duration("delack_min", c.delack_min)?;
        c.sack = p.bool("sack", c.sack)?;
        if let Some(w) = p.bytes_opt("rwnd")? {
            if w < c.mss as u64 {
                return Err(p.err("rwnd", "must hold at least one segment"));
            }
            c.rwnd_bytes = w;
        }
        c.min_rto = p.duration("min_rto", c.min_rto)?;
        c.initial_rto = p.duration("initial_rto", c.initial_rto)?;
        if c.initial_rto.is_zero() {
            return Err(p.err("initial_rto", "must be positive"));
        }
        c.handshake = p.bool("handshake", c.handshake)?;
        c.pacing = p.bool("pacing", c.pacing)?;
        c.tlp = p.bool("tlp", c.tlp)?;
        c.dupthresh = p.u32("dupthresh", c.dupthresh, 1, 1000)?;
        c.tsq = p.bool("tsq", c.tsq)?;
        if let Some(b) = p.bytes_opt("tsq_limit_output_bytes")? {
            if b == 0 {
                return Err(p.err(
                    "tsq_limit_output_bytes",
                    "must be positive (use `tsq = false` to switch TCP Small Queues off)",
                ));
            }
            c.tsq_limit_output_bytes = b;
        }
        c.gso = p.bool("gso", c.gso)?;
        if let Some(b) = p.bytes_opt("gso_max_size")? {
            if !(c.mss as u64..=524_288).contains(&b) {
                return Err(p.err(
                    "gso_max_size",
                    "must hold at least one segment and be at most 512 KiB (BIG TCP)",
                ));
            }
            c.gso_max_bytes = b as u32;
        }
        Ok(c)
    }
}

/// Parses the top-level `[transport]` table.
pub fn parse_transport_table(t: &Table) -> ConfResult<TcpConfig> {
    let mut p = Params::new("transport", t);
    let c = TcpConfig::default().overridden(&mut p)?;
    p.finish()?;
    Ok(c)
}
