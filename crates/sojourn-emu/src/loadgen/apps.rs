//! Live application workloads (`rpm`, `web`, `video`): the experiment model's sans-IO
//! machines ([`sojourn_experiment::apps`], the ones the simulator drives) driven with real
//! kernel TCP in the hosts' namespaces (docs/tests.md "Engines").
//!
//! **One event loop per entry.** A thread owns every socket of the entry — the client's
//! ends, a listener of its own in the server's namespace (an ephemeral port, so accepted
//! connections are the entry's) and the server's accepted ends — all non-blocking, and
//! waits in `ppoll` until a socket is ready or the machine's next wake-up is due. A
//! request's end is seen, the machine told ([`Done`]) and the answer written in the same
//! pass: the server answers with no thread hand-off, and every time is read from the one
//! `CLOCK_MONOTONIC` the forwarder uses.
//!
//! **Connections.** The machine's transfers are mapped onto real connections by
//! [`AppMachine::connection`]: a transfer opened with a handshake opens one (the client,
//! the workload's `to`, always connects and the server accepts, as a browser does; the
//! simulator's downlink load flows start at the server instead), later ones ride on it.
//! Each direction of a connection is a byte stream; a sized transfer is the next `n`
//! bytes of its direction and completes when the receiving application has read up to its
//! last byte. Connections the machine no longer [`AppMachine::keeps`] are closed once
//! idle; load connections close after [`Action::Stop`] and the drain.
//!
//! **Framing.** Client → server messages (requests, TLS ClientHellos) start with an 8-byte
//! header, the message's own length in bytes (big-endian, header included; a message of
//! fewer than 8 bytes is sent as 8). The server's side parses it to find each request's
//! end; the machine, which plays the server's application as well, then names the
//! response's size and the server writes that many bytes at once on the same connection.
//! Responses and load streams carry no header: the client knows how many bytes it asked
//! for.
//!
//! **Self probes** ([`Action::Append`], the draft's "Measuring Responsiveness"): the
//! probe's bytes are the next bytes the load connection's writer hands to its socket, so
//! they queue behind everything that socket already holds (sent and unsent); the receiving
//! end is told in-process at which stream offset they end (the live stand-in for HTTP/2's
//! frames). With `notsent_lowat` the sending socket gets `TCP_NOTSENT_LOWAT`, which the
//! draft recommends so that a self probe does not wait behind a full send buffer
//! ("Measuring Responsiveness"): the kernel then takes new bytes only while less than that
//! is unsent.
//!
//! Every connection is a flow record (its main direction: the load's, else server →
//! client, with the bytes delivered that way); loads' senders are sampled for TCP_INFO.

use super::{
    account_sender, flow_key, host_ip, is_timeout, mark, read, unlive, write, ConnKey, Host,
    Shared, CHUNK,
};
use crate::plan::kernel_cc;
use crate::sock;
use sojourn_core::Time;
use sojourn_experiment::apps::{Action, AppMachine, AppStep, Body, Done, Token};
use sojourn_experiment::transport::TcpConfig;
use sojourn_record::flows::{FlowKind, FlowRecord};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// Bytes of a request's header: its length, big-endian.
pub const FRAME_HEADER_BYTES: u64 = 8;
/// The longest the loop sleeps, so it sees the run's end.
const MAX_SLEEP_NS: u64 = 50_000_000;
/// Reads or writes per socket per pass, so one busy socket cannot starve the others.
const OPS_PER_PASS: usize = 16;
/// Connections one entry holds open at most (two descriptors each): a transfer that would
/// open one more is not started and counted in summary.json's `skipped_flows`, as the load
/// generator's other arrivals beyond its thread limit are (an rpm entry at 100 probes a
/// second behind a bloated FIFO holds a few hundred).
pub const MAX_APP_CONNECTIONS: usize = 2048;

/// One application workload entry as the load generator runs it.
pub(super) struct AppEntry {
    pub workload: u32,
    pub entry: usize,
    pub server: Arc<Host>,
    pub client: Arc<Host>,
    pub server_name: String,
    pub client_name: String,
    pub cfg: TcpConfig,
}

/// The sending end of one direction of a connection.
#[derive(Default)]
struct Tx {
    /// Bytes handed to the kernel.
    written: u64,
    /// The stream's bytes queued so far (written up to here).
    target: u64,
    /// An unbounded load stream (until stopped).
    bulk: bool,
    /// Self probes' bytes end here at least (stream offset).
    claimed: u64,
    /// Headers to put in the stream: (message start, message length).
    headers: VecDeque<(u64, u64)>,
    /// Shut the write side once everything queued is written.
    shut: bool,
    shut_done: bool,
}

impl Tx {
    fn pending(&self) -> bool {
        self.bulk || self.written < self.target || (self.shut && !self.shut_done)
    }
    /// Queues a message of `n` bytes (framed: with its header); returns its end offset.
    fn queue(&mut self, n: u64, framed: bool) -> u64 {
        let n = if framed { n.max(FRAME_HEADER_BYTES) } else { n };
        let start = self.target.max(self.claimed);
        if framed {
            self.headers.push_back((start, n));
        }
        self.target = start + n;
        self.target
    }
}

/// Parses request headers on the server's side of a client → server stream.
#[derive(Default)]
struct Framer {
    /// Where the current message started, its header bytes so far, its length.
    start: u64,
    hdr: [u8; 8],
    got: usize,
    len: Option<u64>,
}

impl Framer {
    /// Takes the bytes `data` of the stream from offset `base` on; pushes the end offset of
    /// every message they complete.
    fn feed(&mut self, base: u64, data: &[u8], ends: &mut Vec<u64>) {
        let mut i = 0usize;
        while i < data.len() {
            let at = base + i as u64;
            let Some(len) = self.len else {
                self.hdr[self.got] = data[i];
                self.got += 1;
                i += 1;
                if self.got == 8 {
                    let len = u64::from_be_bytes(self.hdr).max(FRAME_HEADER_BYTES);
                    self.len = Some(len);
                    if self.start + len == at + 1 {
                        ends.push(at + 1);
                        *self = Framer {
                            start: at + 1,
                            ..Framer::default()
                        };
                    }
                }
                continue;
            };
            let end = self.start + len;
            let take = (end - at).min((data.len() - i) as u64);
            i += take as usize;
            if at + take == end {
                ends.push(end);
                *self = Framer {
                    start: end,
                    ..Framer::default()
                };
            }
        }
    }
}

/// The receiving end of one direction.
#[derive(Default)]
struct Rx {
    read: u64,
    /// Transfers ending in this stream: (end offset, token, opened with a handshake).
    expect: VecDeque<(u64, Token, bool)>,
    /// The server's side of a request stream: each message's end comes from its header.
    framer: Option<Framer>,
    eof: bool,
}

struct LiveConn {
    key: Token,
    client: Option<Arc<OwnedFd>>,
    server: Option<Arc<OwnedFd>>,
    local: SocketAddr,
    connecting: bool,
    connected_at: Option<Time>,
    /// client → server, server → client.
    up: Tx,
    down: Tx,
    /// At the server (the up stream), at the client (the down stream).
    up_rx: Rx,
    down_rx: Rx,
    flow: u32,
    /// A load connection: its load runs up (client → server).
    load_up: Option<bool>,
    stopped: bool,
}

impl LiveConn {
    fn idle(&self) -> bool {
        !self.up.pending()
            && !self.down.pending()
            && self.up_rx.expect.is_empty()
            && self.down_rx.expect.is_empty()
    }
    /// A stopped load whose stream has ended at its receiver and nothing else is due.
    fn drained(&self) -> bool {
        match self.load_up {
            Some(up) => {
                let (rx, other_tx, other_rx) = if up {
                    (&self.up_rx, &self.down, &self.down_rx)
                } else {
                    (&self.down_rx, &self.up, &self.up_rx)
                };
                self.stopped && rx.eof && !other_tx.pending() && other_rx.expect.is_empty()
            }
            None => false,
        }
    }
}

struct Loop<'a> {
    sh: &'a Arc<Shared>,
    e: &'a AppEntry,
    listener: OwnedFd,
    peer: SocketAddr,
    conns: Vec<Option<LiveConn>>,
    by_key: HashMap<Token, usize>,
    by_local: HashMap<SocketAddr, usize>,
    lowat: Option<u64>,
    /// Machine events due: (token, at, connected at).
    done: VecDeque<Done>,
    buf: Vec<u8>,
}

fn nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on our own descriptor.
    let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if fl < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An integer `IPPROTO_TCP` option.
fn set_tcp_int(fd: &OwnedFd, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: v is a readable c_int.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `TCP_NODELAY`: a small request or response leaves at once even while earlier bytes are
/// unacknowledged (Nagle's algorithm, RFC 896, off), as HTTP clients and servers set it; with
/// Nagle on, a message could wait for a delayed ACK (40 ms in Linux).
fn set_nodelay(fd: &OwnedFd) -> io::Result<()> {
    set_tcp_int(fd, libc::TCP_NODELAY, 1)
}

/// `TCP_NOTSENT_LOWAT` (Linux ≥ 3.12): at most `bytes` unsent bytes before the socket
/// stops taking writes (and `poll` stops reporting it writable).
fn set_notsent_lowat(fd: &OwnedFd, bytes: u64) -> io::Result<()> {
    set_tcp_int(
        fd,
        libc::TCP_NOTSENT_LOWAT,
        bytes.min(i32::MAX as u64) as libc::c_int,
    )
}

fn so_error(fd: &OwnedFd) -> io::Result<()> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v is a writable c_int of len bytes.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if v != 0 {
        return Err(io::Error::from_raw_os_error(v));
    }
    Ok(())
}

/// Runs entry `e`'s machine `m` until the run ends, then records its summary.
pub(super) fn run(sh: &Arc<Shared>, e: AppEntry, mut m: AppMachine) {
    let v6 = e.cfg.ipv6;
    let lowat = match &m {
        AppMachine::Rpm(r) => r.notsent_lowat(),
        _ => None,
    };
    let setup = (|| -> io::Result<(OwnedFd, SocketAddr)> {
        let fd = e.server.ns.socket_for(v6, libc::SOCK_STREAM)?;
        // Accepted sockets inherit the listener's congestion control (and get it again
        // after accept, before any data).
        sock::set_congestion(&fd, kernel_cc(&e.cfg))?;
        sock::bind(&fd, SocketAddr::new(host_ip(&e.server, v6), 0))?;
        sock::listen(&fd, 1024)?;
        nonblocking(&fd)?;
        let peer = sock::local_addr(&fd)?;
        Ok((fd, peer))
    })();
    match setup {
        Ok((listener, peer)) => {
            let mut lp = Loop {
                sh,
                e: &e,
                listener,
                peer,
                conns: Vec::new(),
                by_key: HashMap::new(),
                by_local: HashMap::new(),
                lowat,
                done: VecDeque::new(),
                buf: vec![0u8; CHUNK],
            };
            lp.drive(&mut m);
            lp.close_all();
        }
        Err(err) => sh.error(format!("w{} {}: listener: {err}", e.workload, m.kind())),
    }
    finish(sh, &e, &m);
}

/// summary.json's `apps` entry of `e` (the simulator's keys).
fn finish(sh: &Shared, e: &AppEntry, m: &AppMachine) {
    let o = sojourn_record::apps::app_entry(
        e.workload,
        m.kind(),
        &e.server_name,
        &e.client_name,
        m.summary(sh.end),
    );
    sh.apps.lock().unwrap().push((e.workload, e.entry, o));
}

impl Loop<'_> {
    fn drive(&mut self, m: &mut AppMachine) {
        let mut wake = m.first_wake();
        while !self.sh.stopped() {
            let now = self.sh.now();
            if let Some(w) = wake {
                if now >= w {
                    // The real time, not the scheduled one: a probe's clock starts when
                    // its connect is issued.
                    let step = m.wake(now);
                    wake = step.wake_at;
                    self.apply(m, step, now, &mut wake);
                    continue;
                }
            }
            self.write_all();
            self.close_finished(m);
            let left = wake
                .map_or(MAX_SLEEP_NS, |w| w.0.saturating_sub(now.0))
                .min(MAX_SLEEP_NS)
                .min(self.sh.end.0.saturating_sub(now.0));
            self.poll(left);
            while let Some(d) = self.done.pop_front() {
                let step = m.done(d);
                self.apply(m, step, d.at, &mut wake);
            }
        }
    }

    /// Does what the machine asked, records its samples, keeps its wake-up.
    fn apply(&mut self, m: &AppMachine, step: AppStep, at: Time, wake: &mut Option<Time>) {
        if !step.samples.is_empty() {
            let mut s = self.sh.app_samples.lock().unwrap();
            for x in &step.samples {
                s.push((
                    at,
                    format!("w{}.{}", self.e.workload, x.entity),
                    x.metric,
                    x.value,
                ));
            }
        }
        // The simulator keeps every timer a machine asks for; the earliest one pending is
        // the next to fire, so the earlier of the two is kept.
        if let Some(t) = step.wake_at {
            *wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        for a in step.actions {
            match a {
                Action::Open {
                    token,
                    src,
                    body,
                    handshake,
                    ..
                } => {
                    let up = src != self.e.server.node;
                    let key = match body {
                        Body::Bulk => token,
                        Body::Sized(_) => m.connection(token),
                    };
                    let slot = if handshake {
                        self.connect(key, body == Body::Bulk, up)
                    } else {
                        self.by_key.get(&key).copied()
                    };
                    let Some(slot) = slot else {
                        // Its connection failed or was closed (a self probe whose load
                        // stopped): the transfer is lost, as in the simulator.
                        continue;
                    };
                    let c = self.conns[slot].as_mut().expect("a live slot");
                    let (tx, rx) = if up {
                        (&mut c.up, &mut c.up_rx)
                    } else {
                        (&mut c.down, &mut c.down_rx)
                    };
                    match body {
                        Body::Bulk => tx.bulk = true,
                        Body::Sized(n) => {
                            let end = tx.queue(n, up);
                            rx.expect.push_back((end, token, handshake));
                        }
                    }
                }
                Action::Append { token, load, bytes } => {
                    let Some(&slot) = self.by_key.get(&load) else {
                        continue;
                    };
                    let c = self.conns[slot].as_mut().expect("a live slot");
                    let Some(up) = c.load_up else { continue };
                    if c.stopped {
                        continue;
                    }
                    let (tx, rx) = if up {
                        (&mut c.up, &mut c.up_rx)
                    } else {
                        (&mut c.down, &mut c.down_rx)
                    };
                    // Behind everything the socket already holds: the next bytes written.
                    let end = tx.written.max(tx.claimed) + bytes;
                    tx.claimed = end;
                    rx.expect.push_back((end, token, false));
                }
                Action::Stop { load } => {
                    let Some(&slot) = self.by_key.get(&load) else {
                        continue;
                    };
                    let c = self.conns[slot].as_mut().expect("a live slot");
                    let Some(up) = c.load_up else { continue };
                    c.stopped = true;
                    let tx = if up { &mut c.up } else { &mut c.down };
                    tx.bulk = false;
                    tx.target = tx.written.max(tx.claimed);
                    tx.shut = true;
                }
            }
        }
    }

    /// Opens a connection for `key` from the client; its slot.
    fn connect(&mut self, key: Token, bulk: bool, up: bool) -> Option<usize> {
        let sh = self.sh;
        let e = self.e;
        if self.by_local.len() >= MAX_APP_CONNECTIONS {
            sh.skipped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        let v6 = e.cfg.ipv6;
        let start = sh.now();
        let (src, dst) = if bulk && up {
            (e.client.node, e.server.node)
        } else {
            (e.server.node, e.client.node)
        };
        let mut rec = FlowRecord::new(0, FlowKind::Tcp, e.workload, src, dst, start);
        rec.cc = e.cfg.cc.name();
        let flow = sh.add_flow(rec);
        let res = (|| -> io::Result<(OwnedFd, SocketAddr)> {
            let fd = e.client.ns.socket_for(v6, libc::SOCK_STREAM)?;
            super::tcp_options(&fd, &e.cfg)?;
            set_nodelay(&fd)?;
            if let (true, true, Some(l)) = (bulk, up, self.lowat) {
                set_notsent_lowat(&fd, l)?;
            }
            nonblocking(&fd)?;
            sock::bind(&fd, SocketAddr::new(host_ip(&e.client, v6), 0))?;
            let local = sock::local_addr(&fd)?;
            Ok((fd, local))
        })();
        let (fd, local) = match res {
            Ok(x) => x,
            Err(err) => {
                sh.error(format!("flow {flow}: socket: {err}"));
                return None;
            }
        };
        sh.conn_keys.lock().unwrap().push(ConnKey {
            key: flow_key(local, self.peer, 6),
            flow,
            reply_flow: flow,
        });
        match sock::connect(&fd, self.peer) {
            Ok(()) => {}
            Err(err) if err.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(err) => {
                sh.error(format!("flow {flow}: connect: {err}"));
                return None;
            }
        }
        let c = LiveConn {
            key,
            client: Some(Arc::new(fd)),
            server: None,
            local,
            connecting: true,
            connected_at: None,
            up: Tx::default(),
            down: Tx::default(),
            up_rx: Rx {
                framer: (!(bulk && up)).then(Framer::default),
                ..Rx::default()
            },
            down_rx: Rx::default(),
            flow,
            load_up: bulk.then_some(up),
            stopped: false,
        };
        let slot = match self.conns.iter().position(Option::is_none) {
            Some(s) => {
                self.conns[s] = Some(c);
                s
            }
            None => {
                self.conns.push(Some(c));
                self.conns.len() - 1
            }
        };
        if let Some(old) = self.by_key.insert(key, slot) {
            // A key reused while its old connection lingers: the old one is done.
            if old != slot {
                self.close(old);
                self.by_key.insert(key, slot);
            }
        }
        self.by_local.insert(local, slot);
        Some(slot)
    }

    /// Waits up to `ns` for a socket to be ready, then reads, writes and accepts.
    fn poll(&mut self, ns: u64) {
        let mut fds = vec![libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // (slot, server end) of each entry after the listener.
        let mut who = Vec::new();
        for (slot, c) in self.conns.iter().enumerate() {
            let Some(c) = c else { continue };
            // Each end reads until end of file and asks to write while it has bytes queued
            // (the client also while its connect is in progress).
            let ends = [
                (
                    &c.client,
                    false,
                    c.down_rx.eof,
                    c.connecting || c.up.pending(),
                ),
                (&c.server, true, c.up_rx.eof, c.down.pending()),
            ];
            for (fd, server, eof, out) in ends {
                let Some(fd) = fd else { continue };
                let ev = if eof { 0 } else { libc::POLLIN } | if out { libc::POLLOUT } else { 0 };
                fds.push(libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: ev,
                    revents: 0,
                });
                who.push((slot, server));
            }
        }
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: fds is a valid array of fds.len() pollfd.
        let n = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if n <= 0 {
            return;
        }
        if fds[0].revents != 0 {
            self.accept();
        }
        for (p, &(slot, server)) in fds[1..].iter().zip(&who) {
            if p.revents == 0 {
                continue;
            }
            self.ready(slot, p.revents, server);
        }
    }

    fn accept(&mut self) {
        for _ in 0..OPS_PER_PASS {
            // SAFETY: accept4 fills at most len bytes of addr.
            let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            let fd = unsafe {
                libc::accept4(
                    self.listener.as_raw_fd(),
                    &mut addr as *mut _ as *mut libc::sockaddr,
                    &mut len,
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if fd < 0 {
                let err = io::Error::last_os_error();
                if !is_timeout(&err) && err.raw_os_error() != Some(libc::ECONNABORTED) {
                    self.sh.error(format!("app accept: {err}"));
                }
                return;
            }
            // SAFETY: accept4 returned a new descriptor that we now own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let slot = sock::from_sockaddr(&addr).and_then(|a| self.by_local.get(&a).copied());
            let Some(c) = slot.and_then(|s| self.conns[s].as_mut()) else {
                // A connection whose client end is gone already: close it.
                continue;
            };
            let cfg = &self.e.cfg;
            let mut r = sock::set_congestion(&fd, kernel_cc(cfg))
                .and(mark(&fd, cfg.ipv6, cfg.dscp))
                .and(set_nodelay(&fd));
            if let (Some(false), Some(l)) = (c.load_up, self.lowat) {
                r = r.and(set_notsent_lowat(&fd, l));
            }
            if let Err(err) = r {
                self.sh
                    .error(format!("flow {}: server socket: {err}", c.flow));
            }
            let fd = Arc::new(fd);
            if c.load_up == Some(false) {
                self.sh.live.lock().unwrap().push((c.flow, fd.clone()));
            }
            c.server = Some(fd);
        }
    }

    /// A socket of connection `slot` is ready: the server's end or the client's.
    fn ready(&mut self, slot: usize, revents: i16, server: bool) {
        let now = self.sh.now();
        let sh = self.sh;
        let Some(c) = self.conns[slot].as_mut() else {
            return;
        };
        let fd = if server {
            c.server.clone()
        } else {
            c.client.clone()
        };
        let Some(fd) = fd else { return };
        if !server && c.connecting {
            if revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) == 0 {
                return;
            }
            if let Err(err) = so_error(&fd) {
                sh.error(format!("flow {}: connect: {err}", c.flow));
                self.close(slot);
                return;
            }
            c.connecting = false;
            c.connected_at = Some(now);
            sh.with_flow(c.flow, |r| r.first_byte = Some(now));
            if c.load_up == Some(true) {
                sh.live.lock().unwrap().push((c.flow, fd.clone()));
            }
        }
        if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
            return;
        }
        // This end reads the connection's main direction (its flow record's bytes): the
        // server an upload load's, the client everything else's.
        let main = c.load_up.unwrap_or(false) == server;
        let rx = if server { &mut c.up_rx } else { &mut c.down_rx };
        let got = receive(
            sh,
            &fd,
            rx,
            &mut self.buf,
            &mut self.done,
            c.connected_at,
            main.then_some(c.flow),
        );
        if let Err(err) = got {
            let end = if server { "server" } else { "client" };
            sh.error(format!("flow {}: {end} read: {err}", c.flow));
            self.close(slot);
        }
    }

    /// Writes what every connection has queued, as far as its socket takes it.
    fn write_all(&mut self) {
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_mut() else {
                continue;
            };
            let mut failed = None;
            if !c.connecting {
                if let Some(fd) = &c.client {
                    if let Err(err) = send(fd, &mut c.up) {
                        failed = Some(err);
                    }
                }
            }
            if let Some(fd) = &c.server {
                if let Err(err) = send(fd, &mut c.down) {
                    failed = Some(err);
                }
            }
            if let Some(err) = failed {
                self.sh.error(format!("flow {}: write: {err}", c.flow));
                self.close(slot);
            }
        }
    }

    /// Closes the connections the machine is done with.
    fn close_finished(&mut self, m: &AppMachine) {
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_ref() else {
                continue;
            };
            let done = match c.load_up {
                Some(_) => c.drained(),
                None => !c.connecting && c.idle() && !m.keeps(c.key),
            };
            if done {
                self.close(slot);
            }
        }
    }

    fn close(&mut self, slot: usize) {
        let Some(c) = self.conns[slot].take() else {
            return;
        };
        if self.by_key.get(&c.key) == Some(&slot) {
            self.by_key.remove(&c.key);
        }
        self.by_local.remove(&c.local);
        let now = self.sh.now();
        let sender = match c.load_up {
            Some(true) => c.client.as_ref(),
            _ => c.server.as_ref(),
        };
        if let Some(fd) = sender {
            account_sender(self.sh, c.flow, fd);
        }
        if c.load_up.is_some() {
            unlive(self.sh, c.flow);
        }
        self.sh.with_flow(c.flow, |r| {
            if r.end.is_none() {
                r.end = Some(now);
            }
        });
        // The descriptors close as `c` drops (the TCP_INFO list let go of its copy).
    }

    fn close_all(&mut self) {
        for slot in 0..self.conns.len() {
            if let Some(c) = self.conns[slot].take() {
                let sender = match c.load_up {
                    Some(true) => c.client.as_ref(),
                    _ => c.server.as_ref(),
                };
                if let Some(fd) = sender {
                    account_sender(self.sh, c.flow, fd);
                }
                unlive(self.sh, c.flow);
            }
        }
        self.by_key.clear();
        self.by_local.clear();
    }
}

/// Writes `tx`'s queued bytes (and its headers) until the socket takes no more.
fn send(fd: &OwnedFd, tx: &mut Tx) -> io::Result<()> {
    let mut buf = [0u8; CHUNK];
    for _ in 0..OPS_PER_PASS {
        let want = if tx.bulk {
            CHUNK as u64
        } else {
            tx.target.saturating_sub(tx.written).min(CHUNK as u64)
        };
        if want == 0 {
            break;
        }
        let (from, to) = (tx.written, tx.written + want);
        // The headers inside [from, to): each message's length, big-endian.
        let mut touched = Vec::new();
        for &(start, len) in &tx.headers {
            if start >= to {
                break;
            }
            let h = len.to_be_bytes();
            for (k, b) in h.iter().enumerate() {
                let at = start + k as u64;
                if at >= from && at < to {
                    buf[(at - from) as usize] = *b;
                    touched.push((at - from) as usize);
                }
            }
        }
        let r = write(fd, &buf[..want as usize]);
        for i in touched {
            buf[i] = 0;
        }
        match r {
            Ok(k) => {
                tx.written += k as u64;
                while tx
                    .headers
                    .front()
                    .is_some_and(|&(s, _)| s + FRAME_HEADER_BYTES <= tx.written)
                {
                    tx.headers.pop_front();
                }
            }
            Err(e) if is_timeout(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    if tx.shut && !tx.shut_done && !tx.bulk && tx.written >= tx.target {
        // SAFETY: shutdown(2) of our socket: the FIN follows the data.
        unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) };
        tx.shut_done = true;
    }
    Ok(())
}

/// Reads what `fd` has into `rx`, queueing a [`Done`] for every transfer whose last byte
/// arrived; `flow`: the connection's record counts these bytes as delivered.
fn receive(
    sh: &Shared,
    fd: &OwnedFd,
    rx: &mut Rx,
    buf: &mut [u8],
    done: &mut VecDeque<Done>,
    connected_at: Option<Time>,
    flow: Option<u32>,
) -> io::Result<()> {
    for _ in 0..OPS_PER_PASS {
        let n = match read(fd, buf) {
            Ok(0) => {
                rx.eof = true;
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        let now = sh.now();
        if let Some(fr) = rx.framer.as_mut() {
            // The server's parser: each message's end from its header.
            let mut ends = Vec::new();
            fr.feed(rx.read, &buf[..n], &mut ends);
            rx.read += n as u64;
            for end in ends {
                match rx.expect.pop_front() {
                    Some((want, token, hs)) if want == end => done.push_back(Done {
                        token,
                        at: now,
                        connected_at: if hs { connected_at } else { None },
                    }),
                    other => {
                        return Err(io::Error::other(format!(
                            "a request ends at byte {end} of its stream, expected {:?}",
                            other.map(|o| o.0)
                        )))
                    }
                }
            }
        } else {
            rx.read += n as u64;
            while let Some(&(end, token, hs)) = rx.expect.front() {
                if end > rx.read {
                    break;
                }
                rx.expect.pop_front();
                done.push_back(Done {
                    token,
                    at: now,
                    connected_at: if hs { connected_at } else { None },
                });
            }
        }
        if let Some(f) = flow {
            let got = rx.read;
            sh.with_flow(f, |r| r.delivered_bytes = got);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` to a [`Framer`] cut into reads at `cuts`; the message ends found.
    fn frame_ends(stream: &[u8], cuts: &[usize]) -> Vec<u64> {
        let mut fr = Framer::default();
        let mut ends = Vec::new();
        let mut last = 0;
        for &c in cuts.iter().chain([stream.len()].iter()) {
            fr.feed(last as u64, &stream[last..c], &mut ends);
            last = c;
        }
        ends
    }

    #[test]
    fn tx_queues_framed_messages_with_their_length_header() {
        // A 100-B request then a 3-B one (sent as the 8-B header alone): the stream's
        // messages end at 100 and 108.
        let mut tx = Tx::default();
        assert_eq!(tx.queue(100, true), 100);
        assert_eq!(tx.queue(3, true), 108);
        assert_eq!(tx.headers, VecDeque::from(vec![(0, 100), (100, 8)]));
        // Unframed (a response): exactly its bytes.
        let mut rx = Tx::default();
        assert_eq!(rx.queue(3, false), 3);
    }

    #[test]
    fn the_server_finds_each_request_end_from_its_header_however_the_reads_cut() {
        // Three requests: 100, 8 and 517 B, each starting with its length big-endian.
        let mut s = Vec::new();
        for len in [100u64, 8, 517] {
            let mut m = vec![0u8; len as usize];
            m[..8].copy_from_slice(&len.to_be_bytes());
            s.extend(m);
        }
        let want = vec![100, 108, 625];
        assert_eq!(frame_ends(&s, &[]), want);
        // Reads that split a header and end exactly on a message's end.
        assert_eq!(frame_ends(&s, &[3, 100, 104, 111, 200]), want);
        // One byte at a time.
        let every: Vec<usize> = (1..s.len()).collect();
        assert_eq!(frame_ends(&s, &every), want);
    }
}
