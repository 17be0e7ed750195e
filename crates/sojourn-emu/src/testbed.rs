//! A minimal live topology for the datapath's own tests and benchmarks: two hosts, `a`
//! (10.0.1.1) and `b` (10.0.2.1), each in its own namespace, joined by veth pairs to a
//! forwarder namespace `f` whose two ports carry one emulated link per direction.
//!
//! ```text
//!  [a] eth0 ── pa [f] pb ── eth0 [b]      link 0: a→b (egress pb), link 1: b→a (egress pa)
//! ```
//! The hosts route the other side's /24 through a gateway address whose MAC is the
//! forwarder port's, entered as a permanent neighbour (nothing answers ARP in `f`); tx
//! checksumming is off on the hosts' veths (so frames crossing the AF_PACKET forwarder
//! carry complete checksums) and with it GSO/TSO; GRO is off on the forwarder's ports.
//! The orchestration of real experiments (many hosts, graph topologies) is `run.rs`'s.

use crate::forward::{Egress, LinkPlan, Plan, PortPlan, RateModel, Route};
use crate::netns::{self, Guard, Mac, Offloads, VethEnd};
use sojourn_core::params::Value;
use sojourn_core::Duration;
use std::net::{IpAddr, Ipv4Addr};

pub const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
pub const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);

/// The namespaces and devices of one two-host testbed (removed when dropped).
pub struct Testbed {
    pub guard: Guard,
    pub ns_a: String,
    pub ns_b: String,
    pub ns_f: String,
    pub port_a: PortPlan,
    pub port_b: PortPlan,
}

/// One direction's link settings.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub rate_bps: u64,
    pub delay: Duration,
    pub qdisc: Value,
    pub loss: f64,
}

impl LinkSpec {
    pub fn new(rate_bps: u64, delay: Duration, qdisc: &str) -> LinkSpec {
        LinkSpec {
            rate_bps,
            delay,
            qdisc: Value::Str(qdisc.into()),
            loss: 0.0,
        }
    }
}

impl Testbed {
    /// Creates the three namespaces and two veth pairs.
    pub fn new(mtu: u32) -> netns::Result<Testbed> {
        let mut guard = Guard::new()?;
        let tag = guard.mac_tag();
        let ns_a = guard.add_netns("a")?;
        let ns_b = guard.add_netns("b")?;
        let ns_f = guard.add_netns("f")?;
        netns::make_forwarder_ns(&ns_f)?;
        let (mac_a, mac_pa, mac_b, mac_pb) = (
            Mac::local(tag, 1),
            Mac::local(tag, 2),
            Mac::local(tag, 3),
            Mac::local(tag, 4),
        );
        let (if_a, if_pa, if_b, if_pb) = (
            guard.ifname("a0"),
            guard.ifname("pa"),
            guard.ifname("b0"),
            guard.ifname("pb"),
        );
        guard.add_veth(
            &VethEnd {
                ns: ns_a.clone(),
                ifname: if_a.clone(),
                mac: mac_a,
                addrs: vec![(IpAddr::V4(A_ADDR), 24)],
            },
            &VethEnd {
                ns: ns_f.clone(),
                ifname: if_pa.clone(),
                mac: mac_pa,
                addrs: vec![],
            },
            mtu,
        )?;
        guard.add_veth(
            &VethEnd {
                ns: ns_b.clone(),
                ifname: if_b.clone(),
                mac: mac_b,
                addrs: vec![(IpAddr::V4(B_ADDR), 24)],
            },
            &VethEnd {
                ns: ns_f.clone(),
                ifname: if_pb.clone(),
                mac: mac_pb,
                addrs: vec![],
            },
            mtu,
        )?;
        let gw_a = IpAddr::V4(Ipv4Addr::new(10, 0, 1, 254));
        let gw_b = IpAddr::V4(Ipv4Addr::new(10, 0, 2, 254));
        netns::neigh_add(&ns_a, &if_a, gw_a, mac_pa)?;
        netns::route_add(&ns_a, "10.0.2.0/24", &if_a, Some(gw_a))?;
        netns::neigh_add(&ns_b, &if_b, gw_b, mac_pb)?;
        netns::route_add(&ns_b, "10.0.1.0/24", &if_b, Some(gw_b))?;
        let host = Offloads {
            tx_checksum: Some(false),
            ..Offloads::ALL_OFF
        };
        netns::set_offloads(&ns_a, &if_a, host)?;
        netns::set_offloads(&ns_b, &if_b, host)?;
        netns::set_offloads(&ns_f, &if_pa, Offloads::ALL_OFF)?;
        netns::set_offloads(&ns_f, &if_pb, Offloads::ALL_OFF)?;
        Ok(Testbed {
            guard,
            port_a: PortPlan {
                ifname: if_pa,
                mac: mac_pa,
                peer_mac: mac_a,
                neighbours: vec![],
            },
            port_b: PortPlan {
                ifname: if_pb,
                mac: mac_pb,
                peer_mac: mac_b,
                neighbours: vec![],
            },
            ns_a,
            ns_b,
            ns_f,
        })
    }

    /// A forwarder plan: link 0 carries a→b, link 1 b→a.
    pub fn plan(&self, ab: &LinkSpec, ba: &LinkSpec) -> Plan {
        let link = |name: &str, s: &LinkSpec, port: usize| LinkPlan {
            name: name.into(),
            egress: Egress::Port(port),
            rate: RateModel::Constant(s.rate_bps),
            delay: s.delay,
            delay_schedule: vec![],
            loss: s.loss,
            framing_bytes: 0,
            qdisc: s.qdisc.clone(),
            qdisc_path: format!("links.{name}.qdisc"),
            classifier: None,
        };
        let mut plan = Plan::new(
            vec![self.port_a.clone(), self.port_b.clone()],
            vec![link("ab", ab, 1), link("ba", ba, 0)],
            vec![
                Route {
                    ingress: None,
                    prefix: IpAddr::V4(Ipv4Addr::new(10, 0, 2, 0)),
                    prefix_len: 24,
                    link: 0,
                },
                Route {
                    ingress: None,
                    prefix: IpAddr::V4(Ipv4Addr::new(10, 0, 1, 0)),
                    prefix_len: 24,
                    link: 1,
                },
            ],
        );
        plan.netns = Some(self.ns_f.clone());
        plan
    }
}

/// One datagram as the probe receiver saw it.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub seq: u64,
    /// CLOCK_MONOTONIC ns at the sender's `send` and the receiver's `recv` (one clock).
    pub sent_ns: u64,
    pub recv_ns: u64,
    pub bytes: usize,
}

/// Sends `count` UDP datagrams of `payload` bytes from namespace `ns` to `dst`, paced at
/// `rate_bps` of IP bytes (payload + 28), each carrying its sequence number and send time;
/// stops early at `deadline` (CLOCK_MONOTONIC ns). Returns datagrams sent.
pub fn udp_send(
    ns: &str,
    dst: std::net::SocketAddr,
    payload: usize,
    rate_bps: u64,
    count: u64,
    deadline_ns: u64,
) -> std::io::Result<u64> {
    let ns = ns.to_string();
    let h = std::thread::spawn(move || -> std::io::Result<u64> {
        netns::enter(&ns).map_err(std::io::Error::other)?;
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
        let mut buf = vec![0u8; payload.max(16)];
        let gap_ns = ((payload as u64 + 28) * 8 * 1_000_000_000).div_ceil(rate_bps.max(1));
        let mut next = crate::forward::monotonic_ns();
        let mut sent = 0;
        while sent < count {
            let mut now = crate::forward::monotonic_ns();
            if now > deadline_ns {
                break;
            }
            if next > now {
                std::thread::sleep(std::time::Duration::from_nanos(next - now));
                now = crate::forward::monotonic_ns();
            }
            buf[0..8].copy_from_slice(&sent.to_be_bytes());
            buf[8..16].copy_from_slice(&now.to_be_bytes());
            match sock.send_to(&buf, dst) {
                Ok(_) => sent += 1,
                // The host's own queue is full: back off like a paced sender would.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) => return Err(e),
            }
            next += gap_ns;
        }
        Ok(sent)
    });
    h.join()
        .map_err(|_| std::io::Error::other("sender thread panicked"))?
}

/// A UDP receiver in namespace `ns` on `port`, started on its own thread; collects what
/// arrives until `expect` datagrams came or `deadline_ns` (CLOCK_MONOTONIC) passed.
pub fn udp_receiver(
    ns: &str,
    port: u16,
    expect: u64,
    deadline_ns: u64,
) -> std::io::Result<std::thread::JoinHandle<std::io::Result<Vec<Received>>>> {
    let ns = ns.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || -> std::io::Result<Vec<Received>> {
        let ready = (|| {
            netns::enter(&ns).map_err(std::io::Error::other)?;
            let s = std::net::UdpSocket::bind(("0.0.0.0", port))?;
            s.set_read_timeout(Some(std::time::Duration::from_millis(20)))?;
            Ok::<_, std::io::Error>(s)
        })();
        let sock = match ready {
            Ok(s) => {
                let _ = tx.send(Ok(()));
                s
            }
            Err(e) => {
                let _ = tx.send(Err(std::io::Error::new(e.kind(), e.to_string())));
                return Err(e);
            }
        };
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        while (out.len() as u64) < expect && crate::forward::monotonic_ns() < deadline_ns {
            match sock.recv(&mut buf) {
                Ok(n) if n >= 16 => {
                    let recv_ns = crate::forward::monotonic_ns();
                    out.push(Received {
                        seq: u64::from_be_bytes(buf[0..8].try_into().unwrap()),
                        sent_ns: u64::from_be_bytes(buf[8..16].try_into().unwrap()),
                        recv_ns,
                        bytes: n,
                    });
                }
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    });
    rx.recv()
        .map_err(|_| std::io::Error::other("receiver thread died"))??;
    Ok(h)
}
