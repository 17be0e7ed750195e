//! Live latency probes and isochronous streams: the `ping` and `isochronous` workloads of
//! the simulator (sojourn-sim probe.rs) with kernel sockets, filling probes.parquet with
//! the simulator's columns (docs/tests.md "Engines").
//!
//! - **UDP echo** (`protocol = "udp"`, irtt-like): the prober sends one datagram per
//!   interval to port 2112 (irtt's server port) of the far host, carrying its flow, sequence
//!   number and send time; the far host's responder thread writes its receive time into the
//!   datagram and sends it straight back with the request's DSCP. Both ends read the one
//!   `CLOCK_MONOTONIC`, so both one-way delays are exact.
//! - **ICMP echo** (`protocol = "icmp"`): an ICMP "ping socket" (`SOCK_DGRAM`,
//!   `IPPROTO_ICMP`, Linux ≥ 3.0) in the source's namespace, allowed by widening
//!   `net.ipv4.ping_group_range` *in that namespace only* (the run's own). The far kernel
//!   answers by itself (RFC 792 echo reply, the request's data returned); Linux's
//!   `icmp_reply` sends the reply with the request's TOS, so the mark is kept both ways as
//!   in the simulator. Only the round trip is known, as with ping(8).
//! - **Isochronous** (one way): the same datagram to the responder, which records its
//!   arrival instead of answering.
//!
//! The schedule is fixed (a late answer never delays the next probe, as `ping -i` and
//! irtt keep); frames have the workload's `packet_size` (Ethernet 14 + IPv4 20 + UDP/ICMP
//! 8 bytes of headers, the rest payload). A UDP probe needs 29 payload bytes for its
//! stamps and an ICMP one 20, so a `packet_size` below 71 B (UDP) or 62 B (ICMP) is sent
//! padded to that: the one live deviation from the simulator's sizes.

use super::{flow_key, is_timeout, read, spawn, write, ConnKey, Host, Shared, POLL};
use crate::sock;
use sojourn_core::Time;
use sojourn_experiment::probe::{ProbeMode, ProbePlan};
use sojourn_record::flows::{FlowKind, FlowRecord};
use sojourn_record::probes::{ProbeTable, PROBE_GRACE};
use sojourn_record::Columns;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// irtt's default server port, the simulator's probe port too.
pub const PROBE_PORT: u16 = 2112;
/// Headers inside a probe's frame: Ethernet 14 + IPv4 20 + ICMP/UDP 8 bytes.
const HEADER_BYTES: u32 = 42;
/// UDP probe payload: flow (4), sequence number (8), send time (8), far-end receive
/// time (8), kind (1: 0 = echo, 1 = one way).
const UDP_STAMP_BYTES: usize = 29;
/// ICMP echo data: flow (4), sequence number (8), send time (8).
const ICMP_STAMP_BYTES: usize = 20;
/// ICMP echo header (RFC 792): type, code, checksum, identifier, sequence number.
const ICMP_HEADER_BYTES: usize = 8;
/// ICMP types (RFC 792): echo request 8, echo reply 0.
const ICMP_ECHO: [u8; 2] = [8, 0];

/// One probe: send time, far-end time, answer time (`None` = never).
#[derive(Clone, Copy, Debug, Default)]
struct Stamp {
    sent: Time,
    far: Option<Time>,
    back: Option<Time>,
}

/// A live probe flow and every probe it sent, by sequence number.
pub(super) struct ProbeFlow {
    flow: u32,
    workload: u32,
    mode: ProbeMode,
    stamps: Mutex<Vec<Stamp>>,
}

/// Every probe flow of the run (flow ids ascending: created in workload order).
#[derive(Default)]
pub(super) struct Probes(Mutex<Vec<Arc<ProbeFlow>>>);

impl Probes {
    fn find(&self, flow: u32) -> Option<Arc<ProbeFlow>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|p| p.flow == flow)
            .cloned()
    }
}

/// The hosts a probe workload needs a responder on (UDP echo and one way).
pub(super) fn responder_nodes(q: &ProbePlan) -> Vec<u32> {
    match q.mode {
        ProbeMode::Icmp => Vec::new(),
        _ => q.flows.iter().map(|f| f.1).collect(),
    }
}

/// Creates the flow records of a probe workload and starts its probers.
pub(super) fn start(
    sh: &Arc<Shared>,
    q: &ProbePlan,
    host: &dyn Fn(u32) -> io::Result<Arc<Host>>,
) -> io::Result<()> {
    for &(src, dst) in &q.flows {
        let start = Time::ZERO + q.start;
        let flow = sh.add_flow(FlowRecord::new(
            0,
            FlowKind::Probe,
            q.index,
            src,
            dst,
            start,
        ));
        let pf = Arc::new(ProbeFlow {
            flow,
            workload: q.index,
            mode: q.mode,
            stamps: Mutex::new(Vec::new()),
        });
        sh.probes.0.lock().unwrap().push(pf.clone());
        let (src_host, dst_addr) = (host(src)?, host(dst)?.addr);
        let fd = match q.mode {
            ProbeMode::Icmp => icmp_socket(sh, flow, &src_host, dst_addr, q.dscp)?,
            _ => udp_socket(sh, flow, &src_host, dst_addr, q.dscp)?,
        };
        let fd = Arc::new(fd);
        let stop = q
            .stop
            .map(|s| Time::ZERO + s)
            .unwrap_or(Time::MAX)
            .min(sh.end);
        let (s, f, p, q2) = (sh.clone(), fd.clone(), pf.clone(), q.clone());
        if !spawn(sh, move || prober(&s, &f, &p, &q2, start, stop)) {
            return Err(io::Error::other("cannot start a probe thread"));
        }
        if q.mode != ProbeMode::OneWay {
            let (s, p) = (sh.clone(), pf);
            if !spawn(sh, move || answers(&s, &fd, &p)) {
                return Err(io::Error::other("cannot start a probe thread"));
            }
        }
    }
    Ok(())
}

/// A UDP socket of probe flow `flow` connected to `dst`'s responder, marked `dscp`.
fn udp_socket(sh: &Shared, flow: u32, src: &Host, dst: Ipv4Addr, dscp: u8) -> io::Result<OwnedFd> {
    let fd = src.ns.socket(libc::SOCK_DGRAM)?;
    connect_marked(sh, flow, fd, src, dst, dscp, false)
}

/// An ICMP ping socket of probe flow `flow` in `src`'s namespace. The namespace's
/// `ping_group_range` is widened to every group first: the namespace is the run's own,
/// and the root namespace is never touched.
fn icmp_socket(sh: &Shared, flow: u32, src: &Host, dst: Ipv4Addr, dscp: u8) -> io::Result<OwnedFd> {
    // Documentation/networking/ip-sysctl.rst: "ping_group_range - 2 INTEGERS ... Default
    // "1 0", meaning that nobody (not even root) may create ping sockets."
    src.ns
        .sysctl("net.ipv4.ping_group_range", "0 2147483647")
        .map_err(|e| io::Error::other(format!("net.ipv4.ping_group_range: {e}")))?;
    let fd = src.ns.run(|| {
        // SAFETY: plain socket(2); the fd is owned by the returned OwnedFd.
        let fd = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::IPPROTO_ICMP,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    })?;
    // ICMP has no ports: the packet log keys it by addresses and protocol 1, as the
    // simulator does.
    connect_marked(sh, flow, fd, src, dst, dscp, true)
}

/// Marks, bounds, binds and connects a probe socket and registers its 5-tuple.
fn connect_marked(
    sh: &Shared,
    flow: u32,
    fd: OwnedFd,
    src: &Host,
    dst: Ipv4Addr,
    dscp: u8,
    icmp: bool,
) -> io::Result<OwnedFd> {
    let (port, proto) = if icmp { (0, 1) } else { (PROBE_PORT, 17) };
    if dscp != 0 {
        sock::set_tos(&fd, dscp << 2)?;
    }
    sock::set_timeouts(&fd, POLL)?;
    sock::bind(&fd, SocketAddr::new(IpAddr::V4(src.addr), 0))?;
    let peer = SocketAddr::new(IpAddr::V4(dst), port);
    sock::connect(&fd, peer)?;
    let mut local = sock::local_addr(&fd)?;
    if icmp {
        local.set_port(0);
    }
    sh.conn_keys.lock().unwrap().push(ConnKey {
        key: flow_key(local, peer, proto),
        flow,
        reply_flow: flow,
    });
    Ok(fd)
}

/// Sends probes on the fixed schedule `start + k × interval` until `stop`.
fn prober(sh: &Arc<Shared>, fd: &OwnedFd, pf: &ProbeFlow, q: &ProbePlan, start: Time, stop: Time) {
    let icmp = q.mode == ProbeMode::Icmp;
    let payload = (q.packet_bytes - HEADER_BYTES) as usize;
    let len = if icmp {
        ICMP_HEADER_BYTES + payload.max(ICMP_STAMP_BYTES)
    } else {
        payload.max(UDP_STAMP_BYTES)
    };
    let mut buf = vec![0u8; len];
    let mut next = start;
    let mut sent = 0u64;
    while next < stop && sh.sleep_until(next) {
        let seq = pf.stamps.lock().unwrap().len() as u64;
        let now = sh.now();
        let body = if icmp {
            // Type, code; the kernel fills the checksum and the identifier of a ping
            // socket (net/ipv4/ping.c), the 16-bit sequence number is ours.
            buf[0] = ICMP_ECHO[0];
            buf[1] = 0;
            buf[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
            &mut buf[ICMP_HEADER_BYTES..]
        } else {
            &mut buf[..]
        };
        body[0..4].copy_from_slice(&pf.flow.to_le_bytes());
        body[4..12].copy_from_slice(&seq.to_le_bytes());
        body[12..20].copy_from_slice(&now.0.to_le_bytes());
        if !icmp {
            body[20..28].fill(0);
            body[28] = (q.mode == ProbeMode::OneWay) as u8;
        }
        pf.stamps.lock().unwrap().push(Stamp {
            sent: now,
            ..Stamp::default()
        });
        // A send the host refuses (its queue full) is a lost probe, as for ping(8).
        if write(fd, &buf).is_ok() {
            sent += 1;
        }
        next += q.interval;
    }
    sh.with_flow(pf.flow, |r| r.pkts_sent += sent);
}

/// Reads the answers of an echo flow until the run ends; the first answer of a sequence
/// number counts.
fn answers(sh: &Arc<Shared>, fd: &OwnedFd, pf: &ProbeFlow) {
    let mut buf = vec![0u8; 2048];
    while !sh.stopped() {
        let n = match read(fd, &mut buf) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) => continue,
            Err(e) => {
                sh.error(format!("flow {}: probe read: {e}", pf.flow));
                std::thread::sleep(POLL);
                continue;
            }
        };
        let now = sh.now();
        let (body, far) = if pf.mode == ProbeMode::Icmp {
            if n < ICMP_HEADER_BYTES + ICMP_STAMP_BYTES || buf[0] != ICMP_ECHO[1] {
                continue;
            }
            (&buf[ICMP_HEADER_BYTES..n], None)
        } else {
            if n < UDP_STAMP_BYTES {
                continue;
            }
            let far = u64::from_le_bytes(buf[20..28].try_into().unwrap());
            (&buf[..n], Some(Time(far)))
        };
        if u32::from_le_bytes(body[0..4].try_into().unwrap()) != pf.flow {
            continue;
        }
        let seq = u64::from_le_bytes(body[4..12].try_into().unwrap());
        let counted = {
            let mut st = pf.stamps.lock().unwrap();
            match st.get_mut(seq as usize) {
                Some(s) if s.back.is_none() => {
                    s.back = Some(now);
                    s.far = far;
                    true
                }
                _ => false,
            }
        };
        if counted && pf.mode == ProbeMode::Icmp {
            // The far kernel answered: its delivery is known here, one probe's data.
            sh.with_flow(pf.flow, |r| {
                r.delivered_bytes += (n - ICMP_HEADER_BYTES) as u64
            });
        }
    }
}

/// The responder of a far host on port 2112: stamps and returns echoes with the
/// request's mark, records one-way arrivals.
pub(super) fn start_responder(sh: &Arc<Shared>, host: Arc<Host>) -> io::Result<()> {
    let fd = host.ns.socket(libc::SOCK_DGRAM)?;
    sock::bind(&fd, SocketAddr::new(IpAddr::V4(host.addr), PROBE_PORT))?;
    sock::set_timeouts(&fd, POLL)?;
    // IP_RECVTOS: each datagram's TOS byte comes with it, so the answer can carry the
    // request's DSCP (irtt's server keeps the client's; the simulator's reflector too).
    recv_tos(&fd)?;
    let s = sh.clone();
    let ok = spawn(sh, move || {
        let mut buf = vec![0u8; 65_536];
        let mut tos_now = 0u8;
        while !s.stopped() {
            let (n, peer, tos) = match recv_with_tos(&fd, &mut buf) {
                Ok(r) => r,
                Err(e) if is_timeout(&e) => continue,
                Err(e) => {
                    s.error(format!("probe responder: {e}"));
                    std::thread::sleep(POLL);
                    continue;
                }
            };
            let now = s.now();
            if n < UDP_STAMP_BYTES {
                continue;
            }
            let flow = u32::from_le_bytes(buf[0..4].try_into().unwrap());
            let seq = u64::from_le_bytes(buf[4..12].try_into().unwrap());
            // Only datagrams of this run's probe flows are counted or answered.
            let Some(pf) = s.probes.find(flow) else {
                continue;
            };
            s.with_flow(flow, |r| r.delivered_bytes += n as u64);
            if buf[28] == 1 {
                if let Some(st) = pf.stamps.lock().unwrap().get_mut(seq as usize) {
                    st.far.get_or_insert(now);
                }
                continue;
            }
            buf[20..28].copy_from_slice(&now.0.to_le_bytes());
            // Only the DSCP is mirrored: ECN is the transport's business (RFC 3168 §5).
            let want = tos & !0b11;
            if want != tos_now && sock::set_tos(&fd, want).is_ok() {
                tos_now = want;
            }
            if let Err(e) = send_to(&fd, &buf[..n], peer) {
                if !is_timeout(&e) {
                    s.error(format!("probe responder: send: {e}"));
                }
            }
        }
    });
    if !ok {
        return Err(io::Error::other("cannot start the probe responder thread"));
    }
    Ok(())
}

/// Asks for each datagram's TOS byte as ancillary data (ip(7) `IP_RECVTOS`).
fn recv_tos(fd: &OwnedFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads size_of::<c_int>() bytes of `one`.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_RECVTOS,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One datagram, its sender and its TOS byte (0 if the kernel gave none).
fn recv_with_tos(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, u8)> {
    // SAFETY: all-zero is a valid sockaddr_storage, msghdr and cmsg buffer.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut cbuf = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = &mut addr as *mut _ as *mut libc::c_void;
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: every pointer in msg points at live buffers of the lengths given.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut tos = 0u8;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled (msg_controllen).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                tos = *libc::CMSG_DATA(c);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let peer = sock::from_sockaddr(&addr).ok_or_else(|| io::Error::other("no sender address"))?;
    Ok((n as usize, peer, tos))
}

/// Sends one datagram to `peer`.
fn send_to(fd: &OwnedFd, buf: &[u8], peer: SocketAddr) -> io::Result<()> {
    let SocketAddr::V4(a) = peer else {
        return Err(io::Error::other("probes are IPv4"));
    };
    // SAFETY: sockaddr_in is plain old data.
    let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = a.port().to_be();
    sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    // SAFETY: buf and sin are readable for the lengths given.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            0,
            &sin as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// probes.parquet in the simulator's columns: one row per probe sent before the run's
/// last second, flows in creation order, probes in sending order; `None` without probes.
pub(super) fn columns(probes: &Probes, end: Time) -> Option<Columns> {
    let flows = probes.0.lock().unwrap();
    if flows.is_empty() {
        return None;
    }
    // As in the simulator: the last second's probes may still be on their way.
    let cutoff = end.0.saturating_sub(PROBE_GRACE.0);
    let mut c = ProbeTable::default();
    let mut order: Vec<&Arc<ProbeFlow>> = flows.iter().collect();
    order.sort_by_key(|p| p.flow);
    for pf in order {
        for (seq, st) in pf.stamps.lock().unwrap().iter().enumerate() {
            if st.sent.0 >= cutoff {
                break;
            }
            c.push(
                pf.flow,
                pf.workload,
                pf.mode,
                seq as u64,
                st.sent,
                st.far,
                st.back,
            );
        }
    }
    Some(c.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_of_the_last_second_are_left_out() {
        // A 10 s run: a probe sent at 8.8 s is kept, one at 9.0 s is not.
        let p = Probes::default();
        let f = ProbeFlow {
            flow: 3,
            workload: 1,
            mode: ProbeMode::Udp,
            stamps: Mutex::new(Vec::new()),
        };
        f.stamps.lock().unwrap().extend([
            Stamp {
                sent: Time(8_800_000_000),
                ..Stamp::default()
            },
            Stamp {
                sent: Time(9_000_000_000),
                ..Stamp::default()
            },
        ]);
        p.0.lock().unwrap().push(Arc::new(f));
        let c = columns(&p, Time(10_000_000_000)).unwrap();
        assert_eq!(c.rows(), 1);
        assert!(columns(&Probes::default(), Time(10_000_000_000)).is_none());
    }
}
