//! One AF_PACKET socket per forwarder port, with batched I/O (`recvmmsg`/`sendmmsg`).
//!
//! - `socket(AF_PACKET, SOCK_RAW, 0)` receives nothing until `bind` names the interface
//!   and `ETH_P_ALL`, so no frame of another interface slips in between (packet(7)).
//! - `PACKET_IGNORE_OUTGOING`: the socket does not see the frames it sends itself (a
//!   socket bound to an interface otherwise does, and a forwarder would loop them).
//! - `PACKET_QDISC_BYPASS`: frames we send skip the forwarder-side device's qdisc (a veth
//!   has none worth passing; the emulated qdisc is ours).
//! - Non-blocking; the forwarder sleeps in `ppoll` on all ports with its next timer.
//! - Large socket buffers (`SO_RCVBUFFORCE`, root) absorb bursts while the forwarder sleeps.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// A bound, non-blocking AF_PACKET socket.
pub struct PacketSocket {
    fd: OwnedFd,
    pub ifindex: i32,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setopt(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: v lives across the call; the length matches its type.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

impl PacketSocket {
    /// Opens and binds a socket to interface `ifname` of the calling thread's namespace.
    /// With `vnet_hdr`, every frame moved is preceded by a 10-byte `virtio_net_hdr`
    /// (`PACKET_VNET_HDR`): GSO buffers and partial checksums pass through intact.
    pub fn open(ifname: &str, buf_bytes: i32, vnet_hdr: bool) -> io::Result<PacketSocket> {
        let ifindex = crate::netns::ifindex_here(ifname)?;
        // SAFETY: plain socket(2); the fd is owned immediately.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: raw is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        if vnet_hdr {
            setopt(raw, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
        }
        // Bypass is an optimisation; older kernels without it still work.
        let _ = setopt(raw, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1);
        if setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, buf_bytes).is_err() {
            setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, buf_bytes)?;
        }
        if setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, buf_bytes).is_err() {
            setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, buf_bytes)?;
        }
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid start.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a valid sockaddr_ll of the given length.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(PacketSocket { fd, ifindex })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives up to `bufs.len()` frames, frame `i` into the `buf_len` bytes at
    /// `bufs[i]`; `lens[i]` gets each frame's length, `trunc[i]` whether it was longer
    /// than its buffer. Returns how many arrived (0 when none is waiting).
    ///
    /// # Safety
    /// Every `bufs[i]` must point at `buf_len` writable bytes that nothing else accesses
    /// during the call.
    pub unsafe fn recv_batch(
        &self,
        bufs: &[*mut u8],
        buf_len: usize,
        lens: &mut [u32],
        trunc: &mut [bool],
    ) -> io::Result<usize> {
        let n = bufs.len().min(lens.len()).min(trunc.len()).min(MAX_BATCH);
        let mut iov: [libc::iovec; MAX_BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_BATCH];
        // SAFETY: mmsghdr is plain data; zeroed is a valid start.
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            iov[i].iov_base = bufs[i].cast();
            iov[i].iov_len = buf_len;
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs[..n] point at iovecs that point at live, writable buffers (caller).
        let rc = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        let got = rc as usize;
        for i in 0..got {
            // With MSG_TRUNC, msg_len is the real frame length even when it did not fit.
            let len = msgs[i].msg_len as usize;
            trunc[i] = len > buf_len || msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            lens[i] = len.min(buf_len) as u32;
        }
        Ok(got)
    }

    /// Sends frames in one `sendmmsg` call per run of successes. Returns `(sent, failed)`:
    /// a frame the device refused (e.g. `ENOBUFS` when the veth peer's backlog is full) is
    /// counted as failed and skipped; `EAGAIN` stops early (the caller retries the rest).
    pub fn send_batch(&self, frames: &[&[u8]]) -> (usize, usize, Option<io::Error>) {
        let mut done = 0usize;
        let mut failed = 0usize;
        while done + failed < frames.len() {
            let start = done + failed;
            let n = (frames.len() - start).min(MAX_BATCH);
            let mut iov: [libc::iovec; MAX_BATCH] = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; MAX_BATCH];
            // SAFETY: plain data.
            let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
            for i in 0..n {
                let f = frames[start + i];
                iov[i].iov_base = f.as_ptr() as *mut libc::c_void;
                iov[i].iov_len = f.len();
                msgs[i].msg_hdr.msg_iov = &mut iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: msgs[..n] point at iovecs over live buffers (read only by the kernel).
            let rc = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    n as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if rc > 0 {
                done += rc as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return (done, failed, None),
                Some(libc::EINTR) => continue,
                // The device refused this one frame: count it and go on with the rest.
                Some(libc::ENOBUFS) | Some(libc::ENETDOWN) | Some(libc::ENXIO) => failed += 1,
                _ => {
                    failed += 1;
                    return (done, failed, Some(e));
                }
            }
        }
        (done, failed, None)
    }
}

impl PacketSocket {
    /// Frames the kernel dropped on this socket since the last call (receive buffer
    /// full: the forwarder fell behind), from `PACKET_STATISTICS` (which resets on read).
    pub fn kernel_drops(&self) -> io::Result<u64> {
        #[repr(C)]
        struct TpacketStats {
            packets: u32,
            drops: u32,
        }
        let mut st = TpacketStats {
            packets: 0,
            drops: 0,
        };
        let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
        // SAFETY: st and len are valid out-parameters of the right size.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut TpacketStats).cast(),
                &mut len,
            )
        })?;
        Ok(st.drops as u64)
    }
}

/// Most frames moved per system call.
pub const MAX_BATCH: usize = 64;
