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
//! - Every frame comes with the kernel's receive time (`SO_TIMESTAMPNS`, or the ring
//!   slot's `tp_sec`/`tp_nsec`): when it reached the port, however late the forwarder
//!   reads it (the forwarder enqueues it at that time: `forward::port`).

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `enum tpacket_versions` (linux/if_packet.h): V1 = 0, V2 = 1, V3 = 2.
const TPACKET_V2: libc::c_int = 1;

/// A bound, non-blocking AF_PACKET socket.
pub struct PacketSocket {
    fd: OwnedFd,
    pub ifindex: i32,
    /// The mmap'd receive ring, when asked for (`PACKET_RX_RING`, TPACKET_V2).
    ring: Option<RxRing>,
}

/// How a port's socket receives frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// `recvmmsg` in batches of [`MAX_BATCH`]: one system call and one copy per frame
    /// out of the socket's queue.
    Mmsg,
    /// A TPACKET_V2 ring shared with the kernel (`PACKET_RX_RING` + `mmap`): the kernel
    /// copies each frame into the next free slot as it arrives (in the sending host's
    /// context) and frees its skb at once; the forwarder walks the ring without a system
    /// call and copies each frame into its own buffer (frames are held in queues far
    /// longer than a ring slot may be).
    Ring,
}

/// A TPACKET_V2 receive ring (packet(7), Documentation/networking/packet_mmap.rst): `frames`
/// slots of `frame_bytes` each, `per_block` to a block of `block_bytes`; slot `i` belongs
/// to user space while its header's `tp_status` has `TP_STATUS_USER`.
struct RxRing {
    map: *mut u8,
    map_bytes: usize,
    block_bytes: usize,
    frame_bytes: usize,
    per_block: usize,
    frames: usize,
    /// Next slot to look at (the kernel fills slots in order).
    head: Cell<usize>,
    /// Bytes before the Ethernet header that the caller wants too (the virtio header).
    vnet: usize,
}

impl RxRing {
    /// Sets TPACKET_V2 and the ring on `fd` (before `bind`) and maps it. `slot_bytes` is
    /// the longest thing one frame must hold (virtio header + frame).
    fn new(fd: RawFd, slot_bytes: usize, vnet: usize, total_bytes: usize) -> io::Result<RxRing> {
        setopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V2)?;
        // The kernel places the MAC header at TPACKET_ALIGN(32 + 16) (+ the virtio header)
        // − 14 into the slot: 64 bytes of room in front is enough for both.
        let frame_bytes = (slot_bytes + 64).next_multiple_of(libc::TPACKET_ALIGNMENT);
        let page = 4096usize;
        // The kernel allocates each block as 2^order pages: ask for exactly that.
        let block_bytes = frame_bytes
            .next_multiple_of(page)
            .next_power_of_two()
            .max(1 << 16);
        let per_block = block_bytes / frame_bytes;
        let blocks = (total_bytes / block_bytes).max(2);
        let req = libc::tpacket_req {
            tp_block_size: block_bytes as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_bytes as u32,
            tp_frame_nr: (blocks * per_block) as u32,
        };
        // SAFETY: req is a valid tpacket_req of the given length.
        cvt(unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                (&req as *const libc::tpacket_req).cast(),
                std::mem::size_of::<libc::tpacket_req>() as libc::socklen_t,
            )
        })?;
        let map_bytes = blocks * block_bytes;
        // SAFETY: maps the ring the kernel just allocated for fd; checked below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd,
                0,
            )
        };
        let map = if map == libc::MAP_FAILED {
            // MAP_LOCKED may exceed RLIMIT_MEMLOCK; unlocked is as good here (root).
            // SAFETY: as above.
            let m = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if m == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            m
        } else {
            map
        };
        Ok(RxRing {
            map: map.cast(),
            map_bytes,
            block_bytes,
            frame_bytes,
            per_block,
            frames: blocks * per_block,
            head: Cell::new(0),
            vnet,
        })
    }

    #[inline]
    fn slot(&self, i: usize) -> *mut u8 {
        let off = (i / self.per_block) * self.block_bytes + (i % self.per_block) * self.frame_bytes;
        // SAFETY: off < map_bytes for every i < frames.
        unsafe { self.map.add(off) }
    }

    /// As [`PacketSocket::recv_batch`], from the ring.
    ///
    /// # Safety
    /// As [`PacketSocket::recv_batch`].
    unsafe fn recv_batch(
        &self,
        bufs: &[*mut u8],
        buf_len: usize,
        lens: &mut [u32],
        trunc: &mut [bool],
        stamps: &mut [u64],
    ) -> usize {
        let n = bufs
            .len()
            .min(lens.len())
            .min(trunc.len())
            .min(stamps.len());
        let mut got = 0;
        while got < n {
            let i = self.head.get();
            let h = self.slot(i);
            // SAFETY: the slot header is 4-byte aligned (TPACKET_ALIGNMENT) shared memory;
            // tp_status is its first field, written by the kernel after the frame
            // (smp_wmb before __packet_set_status): Acquire orders our reads after it.
            let status = unsafe { &*(h as *const AtomicU32) };
            if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot is ours until we hand it back; the header is plain data.
            let hdr = unsafe { std::ptr::read(h as *const libc::tpacket2_hdr) };
            let start = hdr.tp_mac as usize - self.vnet;
            let have = hdr.tp_snaplen as usize + self.vnet;
            let len = hdr.tp_len as usize + self.vnet;
            let copy = have.min(buf_len);
            // SAFETY: [start, start + have) lies in the slot (the kernel wrote it there);
            // bufs[got] has buf_len writable bytes (caller).
            unsafe { std::ptr::copy_nonoverlapping(h.add(start), bufs[got], copy) };
            lens[got] = copy as u32;
            trunc[got] = len > copy;
            // The kernel stamps every slot as it fills it (CLOCK_REALTIME, the skb's
            // receive time or, without one, the time of the copy into the ring).
            stamps[got] = hdr.tp_sec as u64 * 1_000_000_000 + hdr.tp_nsec as u64;
            // Hand the slot back once the copy is done (Release orders the copy before).
            status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.head.set((i + 1) % self.frames);
            got += 1;
        }
        got
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: map/map_bytes are exactly what mmap returned; nothing uses them after.
        unsafe { libc::munmap(self.map.cast(), self.map_bytes) };
    }
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
    /// With [`RxMode::Ring`], frames are received through a ring of about `ring_bytes`
    /// whose slots hold `slot_bytes` (virtio header included).
    pub fn open(
        ifname: &str,
        buf_bytes: i32,
        vnet_hdr: bool,
        rx: RxMode,
        ring_bytes: usize,
        slot_bytes: usize,
    ) -> io::Result<PacketSocket> {
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
        let ring = match rx {
            RxMode::Mmsg => None,
            RxMode::Ring => Some(RxRing::new(
                raw,
                slot_bytes,
                if vnet_hdr { VNET_HDR_BYTES } else { 0 },
                ring_bytes,
            )?),
        };
        // Bypass is an optimisation; older kernels without it still work.
        let _ = setopt(raw, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1);
        if setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, buf_bytes).is_err() {
            setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, buf_bytes)?;
        }
        if setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, buf_bytes).is_err() {
            setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, buf_bytes)?;
        }
        // Receive times (`SCM_TIMESTAMPNS`): this also makes the kernel stamp each frame
        // as it enters the forwarder namespace (netif_rx on the veth), not when read.
        setopt(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
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
        Ok(PacketSocket { fd, ifindex, ring })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives up to `bufs.len()` frames, frame `i` into the `buf_len` bytes at
    /// `bufs[i]`; `lens[i]` gets each frame's length, `trunc[i]` whether it was longer
    /// than its buffer, `stamps[i]` the kernel's receive time (CLOCK_REALTIME ns, 0 if it
    /// gave none). Returns how many arrived (0 when none is waiting).
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
        stamps: &mut [u64],
    ) -> io::Result<usize> {
        if let Some(r) = &self.ring {
            // SAFETY: the caller's guarantees are the ring's.
            return Ok(unsafe { r.recv_batch(bufs, buf_len, lens, trunc, stamps) });
        }
        let n = bufs
            .len()
            .min(lens.len())
            .min(trunc.len())
            .min(stamps.len())
            .min(MAX_BATCH);
        // One SCM_TIMESTAMPNS control message per frame: CMSG_SPACE(16) = 32 bytes on
        // 64-bit Linux; 64 leaves room should the kernel add another.
        let mut control = [[0u64; 8]; MAX_BATCH];
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
            msgs[i].msg_hdr.msg_control = control[i].as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = std::mem::size_of_val(&control[i]);
        }
        // SAFETY: msgs[..n] point at iovecs that point at live, writable buffers (caller)
        // and at live control buffers of the stated length.
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
            stamps[i] = 0;
            let m = &msgs[i].msg_hdr;
            // SAFETY: walking the control buffer the kernel filled, with the libc macros.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(m);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET
                        && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
                    {
                        let ts = (libc::CMSG_DATA(c) as *const libc::timespec).read_unaligned();
                        stamps[i] = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                    }
                    c = libc::CMSG_NXTHDR(m, c);
                }
            }
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

/// `struct virtio_net_hdr` (`PACKET_VNET_HDR`).
pub const VNET_HDR_BYTES: usize = 10;

/// Most frames moved per system call.
pub const MAX_BATCH: usize = 64;
