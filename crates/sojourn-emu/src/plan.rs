//! Experiment → live plan: which nodes become host namespaces, their addresses, routes and
//! neighbours, and what cannot be honoured live (refused before anything starts, one line
//! naming the key).
//!
//! Every node that ends a flow is a **host**: a network namespace of its own with one veth
//! (`eth0`) whose peer sits in the run's **forwarder namespace**. Every link of the
//! experiment — access links, the bottleneck, router-to-router links of a graph — runs in
//! the forwarder, which moves a packet along the experiment's static routes from the
//! sender's port to the receiver's port. Routers are therefore not namespaces at all.
//!
//! Addresses are private to the run: host k is `10.89.(k/250).(k%250+1)/32`, its only
//! route is `10.89.0.0/16` via the gateway 10.89.255.254 on `eth0`, whose neighbour entry
//! is the forwarder-side veth's MAC (static, so no ARP ever crosses the emulated links).
//! The addresses exist only inside the run's namespaces: nothing is routed outside.

use sojourn_core::params::{ConfError, ConfResult};
use sojourn_experiment::transport::TcpConfig;
use sojourn_experiment::{Experiment, TcpKind, WorkloadPlan};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The kernel's name of a congestion control (`newreno` is the kernel's `reno`).
pub fn kernel_cc(cfg: &TcpConfig) -> &'static str {
    match cfg.cc.name() {
        "newreno" => "reno",
        other => other,
    }
}

/// The gateway every host routes through (answered by nobody: its neighbour is static).
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 89, 255, 254);
/// The run's prefix.
pub const PREFIX: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 89, 0, 0), 16);
/// The run's IPv6 prefix (a unique local address block, RFC 4193): a host's IPv6 address
/// carries its IPv4 address in the last 32 bits ([`addr6`]).
pub const PREFIX6: (Ipv6Addr, u8) = (Ipv6Addr::new(0xfd00, 0x89, 0, 0, 0, 0, 0, 0), 96);

/// The IPv6 address of the host (or gateway) with IPv4 address `v4`: `fd00:89::` + its
/// 32 bits (e.g. 10.89.0.1 → fd00:89::a59:1).
pub fn addr6(v4: Ipv4Addr) -> Ipv6Addr {
    let b = u32::from(v4);
    Ipv6Addr::new(0xfd00, 0x89, 0, 0, 0, 0, (b >> 16) as u16, b as u16)
}
/// At most this many host namespaces per run.
pub const MAX_HOSTS: usize = 1000;

/// One host namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct HostPlan {
    /// Node index in the experiment.
    pub node: u32,
    /// Node name in the experiment (`s0`, `d3`, …).
    pub name: String,
    /// Namespace name (`<run id>-h<k>`, as `netns::Guard::add_netns` names it).
    pub ns: String,
    pub addr: Ipv4Addr,
    /// The host's interface (`eth0`) and its MAC.
    pub host_if: String,
    pub host_mac: [u8; 6],
    /// The peer interface in the forwarder namespace and its MAC.
    pub fwd_if: String,
    pub fwd_mac: [u8; 6],
    /// Sysctls of this host's namespace (`net.ipv4.tcp_ecn` = "1", …).
    pub sysctls: Vec<(String, String)>,
    /// Options of the host's route (`initcwnd 10`, `rto_min 200ms`).
    pub route_opts: Vec<String>,
    /// Generic segmentation offload on the host's interface.
    pub gso: bool,
}

/// The live plan of one run.
#[derive(Clone, Debug)]
pub struct LivePlan {
    pub run_id: String,
    /// The forwarder's namespace (`<run id>-fw`).
    pub fwd_ns: String,
    pub hosts: Vec<HostPlan>,
    /// `host_of_node[node]` = index into `hosts`.
    pub host_of_node: Vec<Option<usize>>,
    /// Some workload runs over IPv6 (`transport.ip = 6`): every host also gets its IPv6
    /// address ([`addr6`]) and route.
    pub ipv6: bool,
    /// The forwarder's GSO mode ([`gso_buffers`]): the hosts keep their offloads on and
    /// every link moves their GSO buffers whole.
    pub gso_buffers: bool,
    /// Why GSO mode is off although the experiment keeps `gso = true` (for summary.json).
    pub gso_note: Option<String>,
}

/// Environment variable that turns the forwarder's GSO mode off (`=0`) for a run whose
/// experiment would allow it: the hosts then segment before the forwarder.
pub const GSO_ENV: &str = "SOJOURN_EMULATE_GSO_BUFFERS";

/// The rule for the forwarder's GSO mode (docs/emulate.md, "GSO buffers"): on when the
/// experiment has a TCP workload, every TCP workload keeps `gso = true` (the default:
/// Linux's TCP builds GSO buffers) and no link's discipline splits buffers itself. Then
/// the hosts keep checksum, scatter-gather, TSO and GSO on, and every emulated link
/// carries a buffer whole — one packet to its qdisc, charged the wire size of all its
/// segments by the serialiser. Otherwise (`gso = false` anywhere: one MSS per buffer; a
/// splitting discipline; UDP only) the hosts' offloads are off and the forwarder moves
/// MTU frames. Returns the mode and, when `gso = true` is kept but the mode is off, why.
pub fn gso_buffers(exp: &Experiment) -> (bool, Option<String>) {
    let tcp: Vec<&TcpConfig> = exp
        .workloads
        .iter()
        .filter_map(|w| match w {
            WorkloadPlan::Tcp(t) if !matches!(t.kind, TcpKind::Thin { udp: true, .. }) => {
                Some(&t.cfg)
            }
            _ => None,
        })
        .collect();
    if tcp.is_empty() || tcp.iter().any(|c| !c.gso) {
        return (false, None);
    }
    if exp.wifi.is_some() {
        return (
            false,
            Some(
                "kind = \"wifi\": the medium aggregates MTU frames (MPDUs): the hosts segment \
                 before the forwarder"
                    .to_string(),
            ),
        );
    }
    if let Some(l) = exp.links.iter().find(|l| l.qdisc.splits_gso()) {
        return (
            false,
            Some(format!(
                "{} splits GSO buffers itself (split_gso of cake and dualpi2, tbf): the \
                 hosts segment before the forwarder",
                l.qdisc_path
            )),
        );
    }
    (true, None)
}

/// A MAC address as `ip` prints it.
pub fn mac_string(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The address of host number `k` of a run.
pub fn host_addr(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 89, (k / 250) as u8, (k % 250 + 1) as u8)
}

/// The key path of a transport key of workload `w`: `workload[i].key` if the workload
/// overrides it, `transport.key` otherwise.
fn tkey(exp: &Experiment, w: usize, key: &str, differs: bool) -> String {
    if differs {
        format!("workload[{w}].{key}")
    } else {
        let _ = exp;
        format!("transport.{key}")
    }
}

/// Checks that the kernel and the live engine can honour every TCP setting of `exp`;
/// `available` is the kernel's `tcp_available_congestion_control`.
pub fn check_transport(exp: &Experiment, available: &[String]) -> ConfResult<()> {
    let d = TcpConfig::default();
    for (i, w) in exp.workloads.iter().enumerate() {
        let WorkloadPlan::Tcp(t) = w else { continue };
        // Application workloads (rpm, web, video) run on the load generator's event loop
        // (loadgen/apps.rs) and are checked as every TCP workload below.
        let c = &t.cfg;
        let base = &exp.transport;
        let key = |k: &str, own: bool| tkey(exp, i, k, own);
        let cc = kernel_cc(c);
        let uses_tcp = !matches!(t.kind, TcpKind::Thin { udp: true, .. });
        if uses_tcp && !available.iter().any(|a| a == cc) {
            return Err(ConfError::new(
                key("cc", c.cc != base.cc),
                format!(
                    "congestion control {:?} is not available in this kernel \
                     (/proc/sys/net/ipv4/tcp_available_congestion_control offers: {})",
                    c.cc.name(),
                    if available.is_empty() {
                        "nothing readable".to_string()
                    } else {
                        available.join(" ")
                    }
                ),
            ));
        }
        // Settings the kernel has no per-socket or per-namespace knob for.
        let refuse = |k: &str, own: bool, why: &str| -> ConfResult<()> {
            Err(ConfError::new(
                key(k, own),
                format!("cannot be honoured live: {why}"),
            ))
        };
        if c.mtu != d.mtu {
            refuse(
                "mtu",
                c.mtu != base.mtu,
                "the emulated hosts use the veth default MTU of 1500 B (set `mss` instead)",
            )?;
        }
        if !c.delayed_ack {
            refuse(
                "delayed_ack",
                c.delayed_ack != base.delayed_ack,
                "Linux always delays ACKs (TCP_QUICKACK is not sticky)",
            )?;
        }
        if c.delack_min != d.delack_min {
            refuse(
                "delack_min",
                c.delack_min != base.delack_min,
                "Linux's delayed-ACK minimum (TCP_DELACK_MIN, 40 ms) is a compile-time constant",
            )?;
        }
        if c.rwnd_bytes != d.rwnd_bytes {
            refuse(
                "rwnd",
                c.rwnd_bytes != base.rwnd_bytes,
                "the kernel autotunes the receive window",
            )?;
        }
        if c.initial_rto != d.initial_rto {
            refuse(
                "initial_rto",
                c.initial_rto != base.initial_rto,
                "Linux's initial RTO (1 s, RFC 6298) is a compile-time constant",
            )?;
        }
        if !c.handshake {
            refuse(
                "handshake",
                c.handshake != base.handshake,
                "kernel TCP always performs the three-way handshake",
            )?;
        }
        if c.pacing && cc != "bbr" {
            refuse(
                "pacing",
                c.pacing != base.pacing,
                "kernel TCP paces on its own only with bbr (or under the fq qdisc, absent here)",
            )?;
        }
        if !c.tsq {
            refuse(
                "tsq",
                c.tsq != base.tsq,
                "TCP Small Queues cannot be switched off in Linux",
            )?;
        }
        if c.gso_max_bytes != d.gso_max_bytes {
            refuse(
                "gso_max_size",
                c.gso_max_bytes != base.gso_max_bytes,
                "the hosts keep the veth's gso_max_size (64 KiB)",
            )?;
        }
        // The live receiver is a real application: its wake-ups and pauses are the
        // machine's own (docs/transport.md, "Over 30 s").
        for (k, set, own) in [
            (
                "reader_wakeup",
                c.reader_wakeup.is_some(),
                c.reader_wakeup != base.reader_wakeup,
            ),
            (
                "reader_pause",
                c.reader_pause.is_some(),
                c.reader_pause != base.reader_pause,
            ),
        ] {
            if set {
                refuse(
                    k,
                    own,
                    "the receiving application is a real process; its wake-ups and pauses \
                     are the machine's",
                )?;
            }
        }
    }
    Ok(())
}

/// Whether a TCP workload asks for Accurate ECN (`ecn = "accecn"`).
pub fn uses_accecn(exp: &Experiment) -> bool {
    exp.workloads
        .iter()
        .any(|w| matches!(w, WorkloadPlan::Tcp(t) if t.cfg.accecn))
}

/// Refuses `ecn = "accecn"` when this kernel cannot negotiate it: `kernel` is whether a
/// namespace may set `net.ipv4.tcp_ecn = 3` ([`crate::sock::kernel_accepts_accecn`];
/// `None` = not known without privilege, accepted here and probed again by the run).
pub fn check_accecn(exp: &Experiment, kernel: Option<bool>) -> ConfResult<()> {
    if kernel != Some(false) {
        return Ok(());
    }
    for (i, w) in exp.workloads.iter().enumerate() {
        let WorkloadPlan::Tcp(t) = w else { continue };
        if t.cfg.accecn {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            return Err(ConfError::new(
                tkey(exp, i, "ecn", t.cfg.accecn != exp.transport.accecn),
                format!(
                    "cannot be honoured live: this kernel ({release}) refuses net.ipv4.tcp_ecn = 3, \
                     the setting that negotiates Accurate ECN (RFC 9768) on the sending and the \
                     receiving host (it accepts 0-2 only); use ecn = true (RFC 3168)"
                ),
            ));
        }
    }
    Ok(())
}

/// net.ipv4.tcp_ecn for a host that sends with `out` (0 none, 1 ECN, 3 AccECN) and must
/// accept AccECN on incoming connections if `accept_accecn` (include/net/tcp_ecn.h
/// `enum tcp_ecn_mode`: 1 = in ECN/out ECN, 2 = in ECN/out none, 3 = in AccECN/out AccECN,
/// 4 = in AccECN/out ECN, 5 = in AccECN/out none).
fn tcp_ecn_mode(out: u8, accept_accecn: bool) -> &'static str {
    match (out, accept_accecn) {
        (3, _) => "3",
        (1, false) => "1",
        (1, true) => "4",
        (_, false) => "2",
        (_, true) => "5",
    }
}

/// Host-namespace settings a workload needs: (sysctl, value) pairs for its sender host.
fn host_sysctls(c: &TcpConfig) -> Vec<(String, String)> {
    let d = TcpConfig::default();
    let mut v = Vec::new();
    // net.ipv4.tcp_ecn = 1 requests ECN on outgoing connections (the default 2 only
    // accepts it when asked), Documentation/networking/ip-sysctl.rst.
    // 3 asks for Accurate ECN and accepts it (and RFC 3168 ECN) on incoming connections.
    let out = if c.accecn { 3 } else { c.ecn as u8 };
    v.push((
        "net.ipv4.tcp_ecn".to_string(),
        tcp_ecn_mode(out, false).to_string(),
    ));
    if c.timestamps != d.timestamps {
        v.push((
            "net.ipv4.tcp_timestamps".into(),
            (c.timestamps as u8).to_string(),
        ));
    }
    if c.sack != d.sack {
        v.push(("net.ipv4.tcp_sack".into(), (c.sack as u8).to_string()));
    }
    if c.dupthresh != d.dupthresh {
        v.push(("net.ipv4.tcp_reordering".into(), c.dupthresh.to_string()));
    }
    if c.tlp != d.tlp {
        // tcp_early_retrans: 3 = TLP on (the default), 0 = off.
        v.push((
            "net.ipv4.tcp_early_retrans".into(),
            if c.tlp { "3" } else { "0" }.into(),
        ));
    }
    if c.tsq_limit_output_bytes != d.tsq_limit_output_bytes {
        v.push((
            "net.ipv4.tcp_limit_output_bytes".into(),
            c.tsq_limit_output_bytes.to_string(),
        ));
    }
    v
}

fn route_opts(c: &TcpConfig) -> Vec<String> {
    let d = TcpConfig::default();
    let mut v = Vec::new();
    if c.initial_window != d.initial_window {
        v.push(format!("initcwnd {}", c.initial_window));
    }
    if c.min_rto != d.min_rto {
        v.push(format!("rto_min {}ms", c.min_rto.0.div_ceil(1_000_000)));
    }
    v
}

/// Builds the live plan: one host per node that ends a flow. Per-host settings that two
/// workloads on the same host want differently are refused, naming the later workload.
pub fn plan(exp: &Experiment, run_id: &str) -> ConfResult<LivePlan> {
    let mut host_nodes: Vec<u32> = exp
        .workloads
        .iter()
        .flat_map(|w| w.endpoints())
        .flat_map(|(a, b)| [a, b])
        .collect();
    host_nodes.sort_unstable();
    host_nodes.dedup();
    if host_nodes.len() > MAX_HOSTS {
        return Err(ConfError::new(
            "workload",
            format!(
                "{} hosts end flows; the live engine creates at most {MAX_HOSTS} namespaces",
                host_nodes.len()
            ),
        ));
    }
    let mut host_of_node = vec![None; exp.node_names.len()];
    let mut hosts = Vec::new();
    for (k, &n) in host_nodes.iter().enumerate() {
        host_of_node[n as usize] = Some(k);
        let kk = k as u16;
        hosts.push(HostPlan {
            node: n,
            name: exp.node_names[n as usize].clone(),
            ns: format!("{run_id}-h{k}"),
            addr: host_addr(k),
            host_if: "eth0".into(),
            // Locally administered unicast MACs (bit 1 of the first octet set).
            host_mac: [0x02, 0x5a, (kk >> 8) as u8, kk as u8, 0, 1],
            fwd_if: format!("{run_id}p{k}"),
            fwd_mac: [0x02, 0x5a, (kk >> 8) as u8, kk as u8, 0, 2],
            sysctls: Vec::new(),
            route_opts: Vec::new(),
            gso: true,
        });
    }
    // Per-host TCP settings come from the workloads whose senders live there. A request/
    // response server sends too, but with the client's settings where Linux allows
    // per-socket ones (cc); its namespace keeps the defaults otherwise.
    let mut owner: Vec<Option<usize>> = vec![None; hosts.len()];
    for (i, w) in exp.workloads.iter().enumerate() {
        let WorkloadPlan::Tcp(t) = w else { continue };
        let sysctls = host_sysctls(&t.cfg);
        let opts = route_opts(&t.cfg);
        for &(src, _) in &t.flows {
            let h = host_of_node[src as usize].expect("host");
            let hp = &mut hosts[h];
            match owner[h] {
                None => {
                    owner[h] = Some(i);
                    hp.sysctls = sysctls.clone();
                    hp.route_opts = opts.clone();
                    hp.gso = t.cfg.gso;
                }
                Some(j) if j != i => {
                    let same =
                        hp.sysctls == sysctls && hp.route_opts == opts && hp.gso == t.cfg.gso;
                    if !same {
                        return Err(ConfError::new(
                            format!("workload[{i}]"),
                            format!(
                                "host {:?} also sends for workload[{j}] with other host-wide TCP settings \
                                 (ecn, timestamps, sack, dupthresh, tlp, initial_window, min_rto, gso \
                                 are per namespace live); give them the same values or other pairs",
                                hp.name
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    // The receiving end of an Accurate ECN connection must accept it (the kernel default,
    // 2, accepts RFC 3168 ECN only): its tcp_ecn keeps what it asks for on its own
    // outgoing connections and accepts AccECN on incoming ones.
    for w in &exp.workloads {
        let WorkloadPlan::Tcp(t) = w else { continue };
        if !t.cfg.accecn {
            continue;
        }
        for &(_, dst) in &t.flows {
            let hp = &mut hosts[host_of_node[dst as usize].expect("host")];
            let pos = hp.sysctls.iter().position(|(k, _)| k == "net.ipv4.tcp_ecn");
            let out = match pos.map(|i| hp.sysctls[i].1.as_str()) {
                Some("3") => 3,
                Some("1") | Some("4") => 1,
                _ => 0,
            };
            let v = (
                "net.ipv4.tcp_ecn".to_string(),
                tcp_ecn_mode(out, true).to_string(),
            );
            match pos {
                Some(i) => hp.sysctls[i] = v,
                None => hp.sysctls.push(v),
            }
        }
    }
    let ipv6 = exp
        .workloads
        .iter()
        .any(|w| matches!(w, WorkloadPlan::Tcp(t) if t.cfg.ipv6));
    let (mut gso_buffers, mut gso_note) = gso_buffers(exp);
    if gso_buffers && std::env::var(GSO_ENV).is_ok_and(|v| v.trim() == "0") {
        // Like-for-like comparisons with the simulator at routers' links (whose qdiscs see
        // segments there): the hosts segment before the forwarder (docs/emulate.md).
        gso_buffers = false;
        gso_note = Some(format!("{GSO_ENV}=0"));
    }
    Ok(LivePlan {
        run_id: run_id.to_string(),
        fwd_ns: format!("{run_id}-fw"),
        hosts,
        host_of_node,
        ipv6,
        gso_buffers,
        gso_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn exp(text: &str) -> Experiment {
        sojourn_experiment::from_toml(text, Path::new(".")).unwrap()
    }

    const DUMBBELL: &str = r#"
        duration = "2s"
        [topology]
        pairs = 2
        bottleneck = { rate = "10Mbit", delay = "10ms", qdisc = "fq_codel" }
        [[workload]]
        kind = "bulk"
        pairs = "all"
    "#;

    #[test]
    fn dumbbell_hosts_are_the_senders_and_receivers() {
        let e = exp(DUMBBELL);
        let p = plan(&e, "sjabc123").unwrap();
        let names: Vec<&str> = p.hosts.iter().map(|h| h.name.as_str()).collect();
        // left and right are routers: they live in the forwarder, not as hosts.
        assert_eq!(names, ["s0", "d0", "s1", "d1"]);
        assert_eq!(p.fwd_ns, "sjabc123-fw");
        // Interface names must fit IFNAMSIZ (16 with the NUL).
        assert!(p
            .hosts
            .iter()
            .all(|h| h.fwd_if.len() <= 15 && h.ns.starts_with("sjabc123-")));
        assert_eq!(p.hosts[0].addr, Ipv4Addr::new(10, 89, 0, 1));
        assert_eq!(host_addr(250), Ipv4Addr::new(10, 89, 1, 1));
        // Distinct MACs, locally administered and unicast.
        for h in &p.hosts {
            assert_eq!(h.host_mac[0] & 0b11, 0b10);
            assert_ne!(h.host_mac, h.fwd_mac);
        }
    }

    #[test]
    fn missing_congestion_control_is_refused_naming_the_key_and_the_kernel_offer() {
        let mut t = DUMBBELL.to_string();
        t.push_str("\n[transport]\ncc = \"vegas\"\n");
        let e = exp(&t);
        let avail: Vec<String> = ["reno", "bbr", "cubic"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let err = check_transport(&e, &avail).unwrap_err();
        assert_eq!(err.path, "transport.cc");
        assert!(err.msg.contains("reno bbr cubic"), "{}", err.msg);
        // reno is the kernel's name of newreno: accepted.
        let e = exp(&DUMBBELL.replace("pairs = \"all\"", "pairs = \"all\"\ncc = \"newreno\""));
        check_transport(&e, &avail).unwrap();
    }

    #[test]
    fn application_workloads_run_live_and_are_checked_like_any_tcp_workload() {
        for kind in ["rpm", "web", "video"] {
            let e = exp(&DUMBBELL.replace("kind = \"bulk\"", &format!("kind = \"{kind}\"")));
            check_transport(&e, &["cubic".to_string()]).unwrap();
            // Their sockets get the workload's congestion control: one the kernel lacks
            // is refused naming the key.
            let err = check_transport(&e, &["reno".to_string()]).unwrap_err();
            assert_eq!(err.path, "transport.cc", "{kind}");
        }
    }

    #[test]
    fn settings_without_a_kernel_knob_are_refused() {
        let e = exp(&DUMBBELL.replace("pairs = \"all\"", "pairs = \"all\"\nhandshake = false"));
        let err = check_transport(&e, &["cubic".to_string()]).unwrap_err();
        assert_eq!(err.path, "workload[0].handshake");
        // The receiving application's wake-ups and pauses are the live machine's own.
        let mut t = DUMBBELL.to_string();
        t.push_str("\n[transport]\nreader_pause = { every = \"2s\", length = \"1ms\" }\n");
        let err = check_transport(&exp(&t), &["cubic".to_string()]).unwrap_err();
        assert_eq!(err.path, "transport.reader_pause");
        assert!(err.msg.contains("real process"), "{}", err.msg);
        // Accurate ECN: refused with the key and the way out where the kernel refuses
        // net.ipv4.tcp_ecn = 3; accepted where it takes it or cannot be asked.
        let mut t = DUMBBELL.to_string();
        t.push_str("\n[transport]\necn = \"accecn\"\n");
        let e = exp(&t);
        check_transport(&e, &["cubic".to_string()]).unwrap();
        assert!(uses_accecn(&e));
        let err = check_accecn(&e, Some(false)).unwrap_err();
        assert_eq!(err.path, "transport.ecn");
        assert!(err.msg.contains("tcp_ecn = 3"), "{}", err.msg);
        check_accecn(&e, Some(true)).unwrap();
        check_accecn(&e, None).unwrap();
        // Classic ECN needs no probe.
        let t = t.replace("\"accecn\"", "\"ecn\"");
        assert!(!uses_accecn(&exp(&t)));
    }

    #[test]
    fn l4s_congestion_controls_are_refused_by_name_on_this_kernel() {
        // This machine's kernel offers reno, bbr and cubic (tcp_available_congestion_control):
        // DCTCP and Prague are refused before anything starts, naming the offer.
        let avail: Vec<String> = ["reno", "bbr", "cubic"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for cc in ["dctcp", "prague"] {
            let mut t = DUMBBELL.to_string();
            t.push_str(&format!("\n[transport]\ncc = \"{cc}\"\n"));
            let err = check_transport(&exp(&t), &avail).unwrap_err();
            assert_eq!(err.path, "transport.cc");
            assert!(err.msg.contains(&format!("\"{cc}\"")), "{}", err.msg);
            assert!(err.msg.contains("reno bbr cubic"), "{}", err.msg);
        }
    }

    #[test]
    fn gso_mode_follows_the_transport_and_the_disciplines() {
        // The default (`gso = true`, fq_codel): GSO buffers pass whole.
        let p = plan(&exp(DUMBBELL), "x").unwrap();
        assert!(p.gso_buffers && p.gso_note.is_none());
        // `gso = false`: one MSS per buffer, MTU frames.
        let e = exp(&DUMBBELL.replace("pairs = \"all\"", "pairs = \"all\"\ngso = false"));
        let p = plan(&e, "x").unwrap();
        assert!(!p.gso_buffers && p.gso_note.is_none());
        // cake (split_gso on by default) and tbf cut buffers themselves: MTU frames, and
        // the summary says why; cake with split_gso = false keeps buffers whole.
        for (q, on) in [
            ("\"cake\"", false),
            (
                "{ kind = \"tbf\", rate = \"5Mbit\", burst = \"10KB\", limit = \"100KB\" }",
                false,
            ),
            ("{ kind = \"cake\", split_gso = false }", true),
            ("\"dualpi2\"", false),
            ("{ kind = \"dualpi2\", split_gso = false }", true),
            ("\"pfifo\"", true),
        ] {
            let e = exp(&DUMBBELL.replace("qdisc = \"fq_codel\"", &format!("qdisc = {q}")));
            let p = plan(&e, "x").unwrap();
            assert_eq!(p.gso_buffers, on, "{q}");
            if !on {
                let note = p.gso_note.unwrap();
                assert!(
                    note.starts_with("topology.bottleneck.qdisc splits"),
                    "{note}"
                );
            }
        }
        // UDP only: nothing to gain.
        let udp = r#"
            duration = "2s"
            [topology]
            bottleneck = { rate = "10Mbit", delay = "10ms" }
            [[workload]]
            kind = "cbr"
            rate = "1Mbit"
        "#;
        assert!(!plan(&exp(udp), "x").unwrap().gso_buffers);
    }

    #[test]
    fn accecn_sets_tcp_ecn_on_both_ends() {
        // include/net/tcp_ecn.h: 3 = in AccECN/out AccECN on the sender; the receiver
        // keeps not asking (out none) but accepts AccECN: 5.
        let mut t = DUMBBELL.to_string();
        t.push_str("\n[transport]\necn = \"accecn\"\n");
        let p = plan(&exp(&t), "x").unwrap();
        let ecn = |h: &HostPlan| {
            h.sysctls
                .iter()
                .find(|(k, _)| k == "net.ipv4.tcp_ecn")
                .map(|(_, v)| v.clone())
        };
        let by_name = |n: &str| p.hosts.iter().find(|h| h.name == n).unwrap();
        assert_eq!(ecn(by_name("s0")).as_deref(), Some("3"));
        assert_eq!(ecn(by_name("d0")).as_deref(), Some("5"));
        // Classic ECN leaves the receiver at the kernel default (2 accepts ECN).
        let p = plan(&exp(&t.replace("\"accecn\"", "true")), "x").unwrap();
        let by_name = |n: &str| p.hosts.iter().find(|h| h.name == n).unwrap();
        assert_eq!(ecn(by_name("s0")).as_deref(), Some("1"));
        assert_eq!(ecn(by_name("d0")), None);
        assert_eq!(tcp_ecn_mode(1, true), "4");
    }

    #[test]
    fn conflicting_host_settings_are_refused() {
        let text = r#"
            duration = "2s"
            [topology]
            bottleneck = { rate = "10Mbit", delay = "10ms" }
            [[workload]]
            kind = "bulk"
            [[workload]]
            kind = "bulk"
            ecn = true
        "#;
        let err = plan(&exp(text), "x").unwrap_err();
        assert_eq!(err.path, "workload[1]");
        let ok = plan(&exp(&text.replace("ecn = true", "ecn = false")), "x").unwrap();
        assert_eq!(
            ok.hosts[0].sysctls[0],
            ("net.ipv4.tcp_ecn".into(), "2".into())
        );
    }
}
