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
use sojourn_core::qdisc::{BuildCtx, QdiscSpec};
use sojourn_core::Duration;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
pub const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
/// A second address of `b`, reached through [`Testbed::plan_with_baseline`]'s extra
/// zero-delay link: the reference path for delay measurements.
pub const B_ADDR2: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
/// IPv6 addresses of `a` and `b` (ULA, RFC 4193), routed like the IPv4 ones.
pub const A_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 1);
pub const B_ADDR6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 2, 0, 0, 0, 1);

/// The namespaces and devices of one two-host testbed (removed when dropped).
pub struct Testbed {
    pub guard: Guard,
    pub ns_a: String,
    pub ns_b: String,
    pub ns_f: String,
    pub port_a: PortPlan,
    pub port_b: PortPlan,
    /// GSO buffers pass the forwarder (offloads on everywhere, `Plan::gso`).
    pub gso: bool,
}

/// One direction's link settings.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub rate_bps: u64,
    pub delay: Duration,
    pub qdisc: QdiscSpec,
    pub loss: f64,
    /// A token-bucket shaper rather than a wire ([`crate::forward::LinkPlan::shaper`]).
    pub shaper: bool,
}

/// A discipline as an experiment file writes it (`"fq_codel"`, or a table with `kind`),
/// parsed and validated as the experiment model does. Panics on a bad spec: the test bed's
/// callers write theirs as literals.
pub fn qdisc(spec: &Value) -> QdiscSpec {
    QdiscSpec::parse(spec, "qdisc", &BuildCtx::default())
        .unwrap_or_else(|e| panic!("test bed discipline: {e}"))
}

impl LinkSpec {
    pub fn new(rate_bps: u64, delay: Duration, qdisc: &str) -> LinkSpec {
        LinkSpec {
            rate_bps,
            delay,
            qdisc: self::qdisc(&Value::Str(qdisc.into())),
            loss: 0.0,
            shaper: false,
        }
    }
}

impl Testbed {
    /// Creates the three namespaces and two veth pairs (offloads off: MTU frames).
    pub fn new(mtu: u32) -> netns::Result<Testbed> {
        Testbed::with_gso(mtu, false)
    }

    /// As [`Testbed::new`]; with `gso`, checksum, scatter-gather, TSO and GSO stay on at
    /// the hosts and the forwarder's ports, so the hosts' TCP hands the forwarder buffers
    /// of up to 64 KiB.
    pub fn with_gso(mtu: u32, gso: bool) -> netns::Result<Testbed> {
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
                addrs: vec![(IpAddr::V4(A_ADDR), 24), (IpAddr::V6(A_ADDR6), 64)],
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
                addrs: vec![
                    (IpAddr::V4(B_ADDR), 24),
                    (IpAddr::V4(B_ADDR2), 24),
                    (IpAddr::V6(B_ADDR6), 64),
                ],
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
        let gw6_a = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 0xfe));
        let gw6_b = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 2, 0, 0, 0, 0xfe));
        netns::neigh_add(&ns_a, &if_a, gw6_a, mac_pa)?;
        netns::route_add(&ns_a, "fd00:0:0:2::/64", &if_a, Some(gw6_a))?;
        netns::neigh_add(&ns_b, &if_b, gw6_b, mac_pb)?;
        netns::route_add(&ns_b, "fd00:0:0:1::/64", &if_b, Some(gw6_b))?;
        let o = if gso {
            Offloads::GSO_BUFFERS
        } else {
            Offloads::ALL_OFF
        };
        netns::set_offloads(&ns_a, &if_a, o)?;
        netns::set_offloads(&ns_b, &if_b, o)?;
        netns::set_offloads(&ns_f, &if_pa, o)?;
        netns::set_offloads(&ns_f, &if_pb, o)?;
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
            gso,
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
            shaper: s.shaper,
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
                Route {
                    ingress: None,
                    prefix: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 2, 0, 0, 0, 0)),
                    prefix_len: 64,
                    link: 0,
                },
                Route {
                    ingress: None,
                    prefix: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 0)),
                    prefix_len: 64,
                    link: 1,
                },
            ],
        );
        plan.netns = Some(self.ns_f.clone());
        plan.gso = self.gso;
        plan
    }

    /// [`Testbed::plan`] plus link 2: a→[`B_ADDR2`] at `ab`'s rate and qdisc with zero
    /// delay (a /32 route, more specific than link 0's /24).
    pub fn plan_with_baseline(&self, ab: &LinkSpec, ba: &LinkSpec) -> Plan {
        let mut plan = self.plan(ab, ba);
        let mut l = plan.links[0].clone();
        l.name = "ab_ref".into();
        l.delay = Duration::ZERO;
        l.qdisc_path = "links.ab_ref.qdisc".into();
        plan.links.push(l);
        plan.routes.push(Route {
            ingress: None,
            prefix: IpAddr::V4(B_ADDR2),
            prefix_len: 32,
            link: 2,
        });
        plan
    }
}

/// One datagram as the probe receiver saw it.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub seq: u64,
    /// CLOCK_MONOTONIC ns at the sender's `send` and when the datagram reached the
    /// receiving host: the kernel's receive timestamp (`SO_TIMESTAMPNS`, taken as the
    /// veth hands the frame to the host — during the forwarder's send), so neither the
    /// receiving host's softirq nor the receiving thread's wake-up adds to it; the
    /// receiver's own clock after `recv` if the kernel gave none.
    pub sent_ns: u64,
    pub recv_ns: u64,
    pub bytes: usize,
    /// The IP TOS byte / IPv6 traffic class as received (DSCP and ECN).
    pub tos: u8,
    /// Which destination of [`udp_send_to`] it was sent to.
    pub tag: u8,
}

/// Sends `count` UDP datagrams of `payload` bytes from namespace `ns` to `dst` with IP
/// TOS byte `tos`, paced at `rate_bps` of IP bytes (payload + 28), each carrying its
/// sequence number and send time; stops early at `deadline` (CLOCK_MONOTONIC ns).
/// Returns datagrams sent.
pub fn udp_send(
    ns: &str,
    dst: std::net::SocketAddr,
    payload: usize,
    rate_bps: u64,
    count: u64,
    deadline_ns: u64,
    tos: u8,
) -> std::io::Result<u64> {
    udp_send_to(ns, vec![dst], payload, rate_bps, count, deadline_ns, tos)
}

/// As [`udp_send`], sending datagram `i` to `dsts[i % dsts.len()]` (payload byte 16 =
/// that index, read back as [`Received::tag`]): interleaved probes of several paths see
/// the same machine conditions.
pub fn udp_send_to(
    ns: &str,
    dsts: Vec<std::net::SocketAddr>,
    payload: usize,
    rate_bps: u64,
    count: u64,
    deadline_ns: u64,
    tos: u8,
) -> std::io::Result<u64> {
    let ns = ns.to_string();
    let h = std::thread::spawn(move || -> std::io::Result<u64> {
        netns::enter(&ns).map_err(std::io::Error::other)?;
        precise_thread();
        let sock = if dsts[0].is_ipv6() {
            std::net::UdpSocket::bind("[::]:0")?
        } else {
            std::net::UdpSocket::bind("0.0.0.0:0")?
        };
        if dsts[0].is_ipv6() {
            set_int_opt(&sock, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tos as i32)?;
        } else {
            set_int_opt(&sock, libc::IPPROTO_IP, libc::IP_TOS, tos as i32)?;
        }
        // Every datagram due is sent at once, in one `sendmmsg` (at most 64): a sender
        // offering ~100,000 datagrams/s (1.2 Gbit/s of MTU frames) then costs one system
        // call per batch rather than per datagram and sleeps between batches. A sender at
        // real-time priority that never sleeps would take a core whole and, with the
        // forwarder, trip the kernel's real-time throttling (95 % of every second), which
        // stops every real-time thread for ~50 ms.
        const BATCH: usize = 64;
        let len = payload.max(17);
        let mut bufs = vec![vec![0u8; len]; BATCH];
        let addrs: Vec<(libc::sockaddr_storage, libc::socklen_t)> =
            dsts.iter().map(|d| sockaddr(*d)).collect();
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
            let due = ((now.saturating_sub(next)) / gap_ns + 1).min(BATCH as u64);
            let n = due.min(count - sent) as usize;
            let mut iov: Vec<libc::iovec> = Vec::with_capacity(n);
            for (i, buf) in bufs.iter_mut().take(n).enumerate() {
                let seq = sent + i as u64;
                buf[0..8].copy_from_slice(&seq.to_be_bytes());
                buf[8..16].copy_from_slice(&now.to_be_bytes());
                buf[16] = (seq % dsts.len() as u64) as u8;
                iov.push(libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: len,
                });
            }
            // SAFETY: mmsghdr is plain data; zeroed is a valid start.
            let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; n];
            for (i, m) in msgs.iter_mut().enumerate() {
                let (addr, alen) = &addrs[((sent + i as u64) % dsts.len() as u64) as usize];
                m.msg_hdr.msg_name = (addr as *const libc::sockaddr_storage) as *mut _;
                m.msg_hdr.msg_namelen = *alen;
                m.msg_hdr.msg_iov = &mut iov[i];
                m.msg_hdr.msg_iovlen = 1;
            }
            use std::os::fd::AsRawFd;
            // SAFETY: msgs point at live iovecs, buffers and addresses for the call.
            let rc = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), n as u32, 0) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                // The host's own queue is full: back off like a paced sender would.
                if e.raw_os_error() != Some(libc::ENOBUFS) {
                    return Err(e);
                }
            } else {
                sent += rc as u64;
            }
            next += gap_ns * n as u64;
        }
        Ok(sent)
    });
    h.join()
        .map_err(|_| std::io::Error::other("sender thread panicked"))?
}

/// `dst` as a socket address for `sendmmsg`.
fn sockaddr(dst: std::net::SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; zeroed is a valid start.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match dst {
        std::net::SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        std::net::SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in6 and suitably aligned.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
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
            precise_thread();
            // Dual-stack: IPv4 and IPv6 datagrams alike.
            let s = std::net::UdpSocket::bind(("::", port))?;
            set_int_opt(&s, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
            set_int_opt(&s, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
            set_int_opt(&s, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
            // Room for bursts at Gbit/s rates (forced past rmem_max: we are root).
            if set_int_opt(&s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20).is_err() {
                set_int_opt(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, 16 << 20)?;
            }
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
            match recv_with_tos(&sock, &mut buf) {
                Ok((n, tos, kernel_realtime_ns)) if n >= 17 => {
                    let mono = crate::forward::monotonic_ns();
                    // CLOCK_REALTIME → CLOCK_MONOTONIC by their offset now (they advance
                    // alike over the microseconds between the stamp and here).
                    let recv_ns = match kernel_realtime_ns {
                        Some(rt) => {
                            let offset = clock_ns(libc::CLOCK_REALTIME) as i128 - mono as i128;
                            (rt as i128 - offset).clamp(0, mono as i128) as u64
                        }
                        None => mono,
                    };
                    out.push(Received {
                        seq: u64::from_be_bytes(buf[0..8].try_into().unwrap()),
                        sent_ns: u64::from_be_bytes(buf[8..16].try_into().unwrap()),
                        recv_ns,
                        bytes: n,
                        tos,
                        tag: buf[16],
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

fn set_int_opt(
    sock: &std::net::UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: v lives across the call; the length matches its type.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `recvmsg` returning the payload length and the IP_TOS control message (0 if absent).
fn clock_ns(id: libc::clockid_t) -> u64 {
    // SAFETY: clock_gettime writes one timespec.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One datagram: its length, TOS / traffic class and the kernel's receive timestamp
/// (CLOCK_REALTIME ns, `SCM_TIMESTAMPNS`) if any.
fn recv_with_tos(
    sock: &std::net::UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, u8, Option<u64>)> {
    use std::os::fd::AsRawFd;
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 16];
    // SAFETY: msghdr is plain data; zeroed is a valid start.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut tos = 0u8;
    let mut stamp = None;
    // SAFETY: walking the control buffer the kernel filled, with the libc macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = (libc::CMSG_DATA(c) as *const libc::timespec).read_unaligned();
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                tos = *libc::CMSG_DATA(c);
            }
            if (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_TCLASS {
                tos = (libc::CMSG_DATA(c) as *const libc::c_int).read_unaligned() as u8;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, tos, stamp))
}

/// Makes the calling probe thread wake on time: 1 ns timer slack and SCHED_FIFO (priority
/// 5, below the forwarder's) when allowed, so what the probes measure is the forwarder,
/// not the other jobs sharing the cores.
fn precise_thread() {
    // SAFETY: prctl and sched_setscheduler with plain arguments on this thread only.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64);
        if PROBES_REALTIME.load(std::sync::atomic::Ordering::Relaxed) {
            let p = libc::sched_param { sched_priority: 5 };
            libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
        }
    }
}

static PROBES_REALTIME: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether probe senders/receivers run under SCHED_FIFO (default yes). Turn it off for
/// floods: a real-time sender that never sleeps would starve the kernel's softirq thread
/// (ksoftirqd) and with it the receiving host.
pub fn set_probes_realtime(on: bool) {
    PROBES_REALTIME.store(on, std::sync::atomic::Ordering::Relaxed);
}
