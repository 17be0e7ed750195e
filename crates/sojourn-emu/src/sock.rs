//! Socket and namespace system calls for the load generator.
//!
//! A socket belongs to the network namespace of the thread that called `socket(2)`; after
//! that it can be used from any thread. `socket_in` therefore runs only the `socket`
//! call on a short-lived thread that first `setns(2)`s into the host's namespace, so one
//! process serves every host and the caller's own namespace is never changed.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::Duration;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An open handle on a network namespace (`/run/netns/NAME`).
#[derive(Debug)]
pub struct Netns {
    pub name: String,
    file: File,
}

impl Netns {
    /// Opens the namespace created with `ip netns add NAME`.
    pub fn open(name: &str) -> io::Result<Netns> {
        let file = File::open(Path::new("/run/netns").join(name))?;
        Ok(Netns {
            name: name.to_string(),
            file,
        })
    }

    /// Runs `f` on a new thread that has entered this namespace (the caller's thread is
    /// left where it is). Threads that `f` spawns inherit the namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
        let fd = self.file.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: setns on a namespace fd we hold open; affects this thread only.
                cvt(unsafe { libc::setns(fd, libc::CLONE_NEWNET) })?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
        })
    }

    /// A new IPv4 socket in this namespace (close-on-exec).
    pub fn socket(&self, ty: libc::c_int) -> io::Result<OwnedFd> {
        self.socket_for(false, ty)
    }

    /// A new IPv4 or (`v6`) IPv6 socket in this namespace (close-on-exec); an IPv6
    /// socket is IPv6 only (`IPV6_V6ONLY`).
    pub fn socket_for(&self, v6: bool, ty: libc::c_int) -> io::Result<OwnedFd> {
        let domain = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        let fd = self.run(move || {
            // SAFETY: plain socket(2); the fd is owned by the returned OwnedFd.
            let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) })?;
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        })?;
        if v6 {
            setopt(fd.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, &1i32)?;
        }
        Ok(fd)
    }

    /// Writes a sysctl of this namespace (`net.ipv4.tcp_ecn` → /proc/sys/net/ipv4/tcp_ecn):
    /// /proc/sys/net resolves to the namespace of the thread that opens it.
    pub fn sysctl(&self, key: &str, value: &str) -> io::Result<()> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let value = value.to_string();
        self.run(move || std::fs::write(&path, &value))
    }

    /// Reads a sysctl of this namespace.
    pub fn read_sysctl(&self, key: &str) -> io::Result<String> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        self.run(move || std::fs::read_to_string(&path).map(|s| s.trim().to_string()))
    }
}

/// `a` as a `sockaddr_storage` and the length of its family's sockaddr.
fn sockaddr(a: impl Into<SocketAddr>) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data, large enough for either family.
    let mut st: libc::sockaddr_storage = unsafe { zeroed() };
    match a.into() {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is aligned and sized for any sockaddr.
            let s = unsafe { &mut *(&mut st as *mut _ as *mut libc::sockaddr_in) };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = a.port().to_be();
            s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            (st, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above.
            let s = unsafe { &mut *(&mut st as *mut _ as *mut libc::sockaddr_in6) };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = a.port().to_be();
            s.sin6_addr.s6_addr = a.ip().octets();
            (st, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// The socket address in a `sockaddr_storage` the kernel filled.
pub fn from_sockaddr(st: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match st.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let s = unsafe { &*(st as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let s = unsafe { &*(st as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                0,
                0,
            )))
        }
        _ => None,
    }
}

fn setopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: v points to size_of::<T>() readable bytes.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

pub fn bind(fd: &OwnedFd, a: impl Into<SocketAddr>) -> io::Result<()> {
    let (s, len) = sockaddr(a);
    // SAFETY: s is a valid sockaddr of len bytes.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), &s as *const _ as *const libc::sockaddr, len) })
        .map(|_| ())
}

pub fn connect(fd: &OwnedFd, a: impl Into<SocketAddr>) -> io::Result<()> {
    let (s, len) = sockaddr(a);
    // SAFETY: s is a valid sockaddr of len bytes.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), &s as *const _ as *const libc::sockaddr, len) })
        .map(|_| ())
}

pub fn listen(fd: &OwnedFd, backlog: i32) -> io::Result<()> {
    // SAFETY: plain listen(2).
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) }).map(|_| ())
}

/// The local address a socket is bound to.
pub fn local_addr(fd: &OwnedFd) -> io::Result<SocketAddr> {
    // SAFETY: getsockname fills at most len bytes.
    let mut s: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    cvt(unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            &mut s as *mut _ as *mut libc::sockaddr,
            &mut len,
        )
    })?;
    from_sockaddr(&s).ok_or_else(|| io::Error::other("getsockname: not an IP address"))
}

/// Receive and send timeouts (`SO_RCVTIMEO`/`SO_SNDTIMEO`): every blocking call returns
/// within this time, so each loop checks its stop condition (Linux applies `SO_SNDTIMEO`
/// to `connect` and `SO_RCVTIMEO` to `accept` as well).
pub fn set_timeouts(fd: &OwnedFd, t: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    setopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
    setopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDTIMEO, &tv)
}

pub fn set_reuseaddr(fd: &OwnedFd) -> io::Result<()> {
    setopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, &1i32)
}

/// `TCP_MAXSEG` before connect: the MSS this end announces and uses.
pub fn set_maxseg(fd: &OwnedFd, mss: u32) -> io::Result<()> {
    setopt(
        fd.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_MAXSEG,
        &(mss as i32),
    )
}

/// The IP TOS byte (DSCP << 2 | ECN) of an IPv4 socket.
pub fn set_tos(fd: &OwnedFd, tos: u8) -> io::Result<()> {
    setopt(
        fd.as_raw_fd(),
        libc::IPPROTO_IP,
        libc::IP_TOS,
        &(tos as i32),
    )
}

/// The IPv6 traffic class (DSCP << 2 | ECN) of an IPv6 socket.
pub fn set_tclass(fd: &OwnedFd, tclass: u8) -> io::Result<()> {
    setopt(
        fd.as_raw_fd(),
        libc::IPPROTO_IPV6,
        libc::IPV6_TCLASS,
        &(tclass as i32),
    )
}

/// Sets `TCP_CONGESTION` and reads it back: the kernel may refuse (not available) and an
/// unprivileged caller may silently get another one.
pub fn set_congestion(fd: &OwnedFd, name: &str) -> io::Result<()> {
    let c = CString::new(name).map_err(|_| io::Error::other("bad cc name"))?;
    let b = c.as_bytes();
    // SAFETY: b is a valid buffer of b.len() bytes.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            b.as_ptr() as *const libc::c_void,
            b.len() as libc::socklen_t,
        )
    })?;
    let got = congestion(fd)?;
    if got != name {
        return Err(io::Error::other(format!(
            "TCP_CONGESTION reads back {got:?} after setting {name:?}"
        )));
    }
    Ok(())
}

/// The socket's congestion control (`TCP_CONGESTION`).
pub fn congestion(fd: &OwnedFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf has len writable bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    })?;
    let s = &buf[..len as usize];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Ok(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// `struct tcp_info` as in include/uapi/linux/tcp.h (Linux 6.7+ layout; an older kernel
/// fills a prefix and leaves the rest zero).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto_us: u32,
    pub ato_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt_us: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub rehash: u32,
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
}

/// `TCP_INFO` of a socket.
pub fn tcp_info(fd: &OwnedFd) -> io::Result<TcpInfo> {
    let mut ti = TcpInfo::default();
    let mut len = size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: ti is repr(C) plain data of len bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut ti as *mut TcpInfo as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(ti)
}

/// CLOCK_MONOTONIC in ns (the clock of both ends of every flow and of the forwarder).
pub fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime writes one timespec.
    let mut ts: libc::timespec = unsafe { zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Congestion controls this kernel offers (`tcp_available_congestion_control`).
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether this kernel lets a namespace set `net.ipv4.tcp_ecn = 3` (Accurate ECN, RFC 9768,
/// asked for on outgoing and accepted on incoming connections): tried in a fresh network
/// namespace of a short-lived thread (`unshare(CLONE_NEWNET)`; the namespace dies with
/// the thread, nothing else is touched). `None` if the probe cannot be made (no
/// CAP_SYS_ADMIN).
pub fn kernel_accepts_accecn() -> Option<bool> {
    std::thread::spawn(|| {
        // SAFETY: unshare affects only this thread (a network namespace is per task).
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return None;
        }
        // /proc/sys/net resolves against the opening thread's namespace.
        Some(
            std::fs::write("/proc/sys/net/ipv4/tcp_ecn", "3").is_ok()
                && std::fs::read_to_string("/proc/sys/net/ipv4/tcp_ecn")
                    .is_ok_and(|v| v.trim() == "3"),
        )
    })
    .join()
    .ok()
    .flatten()
}

/// Whether this process may administer network namespaces (CAP_NET_ADMIN and CAP_SYS_ADMIN
/// in its effective set: creating namespaces and `setns` need both).
pub fn have_net_admin() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let Some(line) = status.lines().find(|l| l.starts_with("CapEff:")) else {
        return false;
    };
    let Ok(caps) = u64::from_str_radix(line["CapEff:".len()..].trim(), 16) else {
        return false;
    };
    const CAP_NET_ADMIN: u64 = 12;
    const CAP_SYS_ADMIN: u64 = 21;
    caps & (1 << CAP_NET_ADMIN) != 0 && caps & (1 << CAP_SYS_ADMIN) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_layout_matches_the_kernel_header() {
        // include/uapi/linux/tcp.h: tcpi_pacing_rate follows 8 bytes of u8 fields and 24
        // u32 fields (offset 104); the Linux 6.7 struct ends at 248 bytes.
        assert_eq!(std::mem::offset_of!(TcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(TcpInfo, delivered_ce), 196);
        assert_eq!(std::mem::offset_of!(TcpInfo, total_rto), 240);
        assert_eq!(size_of::<TcpInfo>(), 248);
    }

    #[test]
    fn congestion_set_and_read_back_on_a_plain_socket() {
        // Runs in the test's own namespace: reno is built into every kernel (it is the
        // fallback of tcp_cong.c), so setting it must succeed and read back as "reno".
        // SAFETY: plain socket(2).
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        set_congestion(&fd, "reno").unwrap();
        assert_eq!(congestion(&fd).unwrap(), "reno");
        assert!(set_congestion(&fd, "no-such-cc").is_err());
    }
}
