//! The live load generator: every workload kind of the simulator, with real kernel sockets
//! in the hosts' network namespaces (docs/emulate.md "Load generator").
//!
//! - **Same schedules as the simulator.** TCP workloads and thin streams are driven by the
//!   engine-neutral sans-IO [`Generator`]s of sojourn-experiment, the very state machines
//!   the simulator drives, woken at their *scheduled* times (so open-loop arrivals do not
//!   drift with the thread's wake-up latency) and told the *measured* completion times;
//!   UDP on/off sources draw from `Rng::stream(seed, "udp", flow)` with the simulator's
//!   flow numbering. One seed gives the same sizes, think times and open-loop arrival times
//!   in both engines.
//! - **Threads, not an event loop.** One thread per generator and per live connection end,
//!   every blocking call bounded by `SO_RCVTIMEO`/`SO_SNDTIMEO` (100 ms), every loop ending
//!   at the run's end or on stop. Sockets are created inside the right namespace
//!   ([`crate::sock::Netns::socket`]); after that any thread may use them.
//! - **FCT at the application** on one `CLOCK_MONOTONIC` (`Instant`) for both ends: the
//!   client stamps connect, the server stamps the read that completes the planned size.
//!   The server finds the flow from the client's address: the client binds its port and
//!   registers it before connecting, so no header is added to the payload.
//! - **TCP_INFO** of every live sender socket is sampled at the record interval (cwnd,
//!   ssthresh, srtt, pacing rate, in flight, retransmits) when `[record] flows = true`,
//!   under the simulator's metric names.

mod apps;
mod probe;

pub use crate::plan::kernel_cc;
use crate::sock::{self, Netns};
use sojourn_core::rng::Rng;
use sojourn_core::{Addr, Duration, FlowKey, Time};
use sojourn_experiment::apps::AppMachine;
use sojourn_experiment::dist::IntervalDist;
use sojourn_experiment::schedule::{Generator, Open, Payload};
use sojourn_experiment::transport::{TcpConfig, SERVER_PORT, UDP_OVERHEAD_BYTES};
use sojourn_experiment::workload::{OnOff, TcpKind, UdpPlan, WorkloadPlan};
use sojourn_experiment::Experiment;
use sojourn_record::flows::{FlowKind, FlowRecord};
use sojourn_record::metrics::TimeSeries;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// The UDP sink port (the simulator's discard port 9).
pub const UDP_PORT: u16 = 9;
/// Every blocking socket call returns within this time so loops can check for the end.
const POLL: std::time::Duration = std::time::Duration::from_millis(100);
/// At most this many connection threads at once; arrivals beyond it are counted as
/// `skipped_flows` in the summary instead of exhausting the machine.
pub const MAX_FLOW_THREADS: usize = 4096;
/// Bytes handed to `write` at once.
const CHUNK: usize = 64 * 1024;
static ZEROS: [u8; CHUNK] = [0u8; CHUNK];

/// A host as the load generator sees it: its node, address and namespace.
#[derive(Debug)]
pub struct Host {
    pub node: u32,
    pub addr: Ipv4Addr,
    pub ns: Netns,
}

/// What the server does with an accepted connection.
#[derive(Clone, Copy, Debug)]
enum ConnKind {
    /// Read until end of file; the flow completes when `size` bytes arrived (0 = bulk).
    Sink { size: u64 },
    /// Read `request` bytes, then answer `response` bytes on the same connection.
    Rr {
        request: u64,
        response: u64,
        resp_flow: u32,
    },
}

struct Conn {
    flow: u32,
    kind: ConnKind,
    cc: &'static str,
    /// The workload's DSCP: the server marks its end of the connection too.
    dscp: u8,
    done: Mutex<Option<Time>>,
    cv: Condvar,
}

impl Conn {
    fn complete(&self, t: Time) {
        let mut d = self.done.lock().unwrap();
        if d.is_none() {
            *d = Some(t);
        }
        self.cv.notify_all();
    }
}

struct Shared {
    /// CLOCK_MONOTONIC ns of the run's time zero (shared with the forwarder).
    epoch_ns: u64,
    end: Time,
    stop: AtomicBool,
    flows: Mutex<Vec<FlowRecord>>,
    conns: Mutex<HashMap<SocketAddr, Arc<Conn>>>,
    /// TCP sender sockets open now, for TCP_INFO sampling.
    live: Mutex<Vec<(u32, Arc<OwnedFd>)>>,
    threads: AtomicUsize,
    skipped: AtomicU64,
    errors: Mutex<Vec<String>>,
    error_count: AtomicU64,
    /// Every connection's 5-tuple and flows, in the order they were made.
    conn_keys: Mutex<Vec<ConnKey>>,
    /// UDP sources that could not keep to their schedule: (flow, datagrams sent,
    /// datagrams their rate asked for).
    behind: Mutex<Vec<(u32, u64, u64)>>,
    /// Latency-probe and isochronous flows and their probes.
    probes: probe::Probes,
    /// Application workloads' samples not yet in the time series: (time, entity, metric,
    /// value), and each entry's summary.json object (workload, entry, object).
    app_samples: Mutex<Vec<(Time, String, &'static str, f64)>>,
    apps: Mutex<Vec<(u32, usize, serde_json::Value)>>,
}

impl Shared {
    fn now(&self) -> Time {
        Time(sock::monotonic_ns().saturating_sub(self.epoch_ns))
    }
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.now() >= self.end
    }
    /// Sleeps until `t` (false if the run ends first).
    fn sleep_until(&self, t: Time) -> bool {
        loop {
            if self.stopped() {
                return false;
            }
            let now = self.now();
            if now >= t {
                return true;
            }
            let left = (t.0 - now.0).min(50_000_000);
            std::thread::sleep(std::time::Duration::from_nanos(left));
        }
    }
    fn add_flow(&self, rec: FlowRecord) -> u32 {
        let mut f = self.flows.lock().unwrap();
        let id = f.len() as u32;
        let mut rec = rec;
        rec.flow = id;
        f.push(rec);
        id
    }
    fn with_flow<R>(&self, flow: u32, f: impl FnOnce(&mut FlowRecord) -> R) -> R {
        f(&mut self.flows.lock().unwrap()[flow as usize])
    }
    /// Notes a socket error met while the run is on; errors after the end (connections
    /// torn down by the stop) are expected and not counted.
    fn error(&self, msg: String) {
        if self.stopped() {
            return;
        }
        self.note(msg);
    }
    fn note(&self, msg: String) {
        self.error_count.fetch_add(1, Ordering::Relaxed);
        let mut e = self.errors.lock().unwrap();
        if e.len() < 8 {
            e.push(msg);
        }
    }
}

/// Counts a running thread; decrements when dropped.
struct ThreadToken(Arc<Shared>);
impl Drop for ThreadToken {
    fn drop(&mut self) {
        self.0.threads.fetch_sub(1, Ordering::SeqCst);
    }
}

fn spawn(sh: &Arc<Shared>, f: impl FnOnce() + Send + 'static) -> bool {
    if sh.threads.fetch_add(1, Ordering::SeqCst) >= MAX_FLOW_THREADS {
        sh.threads.fetch_sub(1, Ordering::SeqCst);
        return false;
    }
    let token = ThreadToken(sh.clone());
    let r = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let _t = token;
            f()
        });
    if let Err(e) = r {
        // The token moved into the closure was dropped with it: the count is right.
        sh.error(format!("cannot start a thread: {e}"));
        return false;
    }
    true
}

/// A connection the load generator made: its 5-tuple in the direction of its first
/// packet (the client's SYN, the source's first datagram) and the flows whose packets it
/// carries — `flow` in that direction, `reply_flow` in the other (the same flow for a
/// transfer; the response's flow of a request/response transaction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnKey {
    pub key: FlowKey,
    pub flow: u32,
    pub reply_flow: u32,
}

/// A host's address in the IP version asked for: its IPv4 address, or the IPv6 address
/// the live plan gives it ([`crate::plan::addr6`]).
fn host_ip(h: &Host, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(crate::plan::addr6(h.addr))
    } else {
        IpAddr::V4(h.addr)
    }
}

/// The 5-tuple from `local` to `peer`.
fn flow_key(local: SocketAddr, peer: SocketAddr, proto: u8) -> FlowKey {
    FlowKey {
        src_addr: Addr::from(local.ip()),
        dst_addr: Addr::from(peer.ip()),
        src_port: local.port(),
        dst_port: peer.port(),
        proto,
    }
}

/// What the load generator measured.
pub struct LoadResult {
    pub flows: Vec<FlowRecord>,
    /// Arrivals not started because [`MAX_FLOW_THREADS`] connections were open.
    pub skipped_flows: u64,
    /// The first socket errors (connect refused, reset, …) and their total count.
    pub errors: Vec<String>,
    pub error_count: u64,
    /// Every connection made, in order (a port reused later appears again).
    pub conns: Vec<ConnKey>,
    /// UDP sources that fell behind their schedule by more than 1 % of their datagrams
    /// (a source thread that cannot send at its rate on this machine): (flow, datagrams
    /// sent, datagrams the rate asked for up to the run's end).
    pub behind: Vec<(u32, u64, u64)>,
    /// probes.parquet (the simulator's columns), when the run has probe workloads.
    pub probes: Option<sojourn_record::Columns>,
    /// summary.json's `apps` list (application workloads' numbers, in workload then
    /// entry order, as the simulator's), when the run has such workloads.
    pub apps: Option<serde_json::Value>,
    /// Application samples not yet handed out by [`Loadgen::sample`], in time order.
    pub app_series: TimeSeries,
}

/// A running load generator.
pub struct Loadgen {
    sh: Arc<Shared>,
    prev_delivered: Vec<u64>,
}

/// Per-generator context.
#[derive(Clone)]
struct Gen {
    workload: u32,
    src: u32,
    dst: u32,
    src_host: Arc<Host>,
    /// The destination's address in the workload's IP version (`transport.ip`).
    dst_addr: IpAddr,
    cfg: TcpConfig,
    kind: TcpKind,
    stop: Time,
}

impl Loadgen {
    /// Starts servers on every destination host, then every generator. `hosts[node]` is
    /// the host of each node that ends a flow. Time zero of the run is `epoch_ns`
    /// (CLOCK_MONOTONIC, the forwarder's epoch); the load stops at `duration`.
    pub fn start(
        exp: &Experiment,
        seed: u64,
        hosts: &[Option<Arc<Host>>],
        duration: Duration,
        epoch_ns: u64,
    ) -> io::Result<Loadgen> {
        let sh = Arc::new(Shared {
            epoch_ns,
            end: Time::ZERO + duration,
            stop: AtomicBool::new(false),
            flows: Mutex::new(Vec::new()),
            conns: Mutex::new(HashMap::new()),
            live: Mutex::new(Vec::new()),
            threads: AtomicUsize::new(0),
            skipped: AtomicU64::new(0),
            errors: Mutex::new(Vec::new()),
            behind: Mutex::new(Vec::new()),
            error_count: AtomicU64::new(0),
            conn_keys: Mutex::new(Vec::new()),
            probes: probe::Probes::default(),
            app_samples: Mutex::new(Vec::new()),
            apps: Mutex::new(Vec::new()),
        });
        let host = |n: u32| -> io::Result<Arc<Host>> {
            hosts
                .get(n as usize)
                .and_then(|h| h.clone())
                .ok_or_else(|| io::Error::other(format!("node {n} has no live host")))
        };
        // Servers first, so no connection finds a closed port.
        let mut tcp_dst = Vec::new();
        let mut udp_dst = Vec::new();
        let mut probe_dst = Vec::new();
        for w in &exp.workloads {
            match w {
                WorkloadPlan::Udp(u) => udp_dst.extend(u.flows.iter().map(|f| f.1)),
                WorkloadPlan::Probe(q) => probe_dst.extend(probe::responder_nodes(q)),
                WorkloadPlan::Tcp(t) => match t.kind {
                    TcpKind::Thin { udp: true, .. } => udp_dst.extend(t.flows.iter().map(|f| f.1)),
                    TcpKind::RequestResponse { .. } => {
                        // The response goes back on the client's connection.
                        tcp_dst.extend(t.flows.iter().map(|f| f.1))
                    }
                    // An application entry listens on a port of its own (loadgen/apps.rs).
                    TcpKind::App(_) => {}
                    _ => tcp_dst.extend(t.flows.iter().map(|f| f.1)),
                },
            }
        }
        tcp_dst.sort_unstable();
        tcp_dst.dedup();
        udp_dst.sort_unstable();
        udp_dst.dedup();
        probe_dst.sort_unstable();
        probe_dst.dedup();
        for n in probe_dst {
            probe::start_responder(&sh, host(n)?)?;
        }
        // IPv6 listeners too when a workload runs over IPv6 (`transport.ip = 6`).
        let v6 = exp
            .workloads
            .iter()
            .any(|w| matches!(w, WorkloadPlan::Tcp(t) if t.cfg.ipv6));
        let families: &[bool] = if v6 { &[false, true] } else { &[false] };
        for n in tcp_dst {
            for &f in families {
                start_tcp_server(&sh, host(n)?, f)?;
            }
        }
        for n in udp_dst {
            for &f in families {
                start_udp_sink(&sh, host(n)?, f)?;
            }
        }

        // UDP flows get their ids first, in workload order, as in the simulator (its UDP
        // sources are created before any application timer fires): their on/off streams
        // are keyed by that id.
        let mut udp = Vec::new();
        for w in &exp.workloads {
            if let WorkloadPlan::Udp(u) = w {
                for &(src, dst) in &u.flows {
                    let kind = if u.onoff == OnOff::Always {
                        FlowKind::UdpCbr
                    } else {
                        FlowKind::UdpOnOff
                    };
                    let flow = sh.add_flow(FlowRecord::new(
                        0,
                        kind,
                        u.index,
                        src,
                        dst,
                        Time::ZERO + u.start,
                    ));
                    udp.push((u.clone(), flow, host(src)?, host(dst)?.addr));
                }
            }
        }
        for (u, flow, src, dst) in udp {
            let rng = Rng::stream(seed, "udp", flow as u64);
            let s = sh.clone();
            if !spawn(&sh, move || udp_source(&s, &u, flow, &src, dst, rng)) {
                sh.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Probe flows next, in workload order, as the simulator creates them at the start.
        for w in &exp.workloads {
            if let WorkloadPlan::Probe(q) = w {
                probe::start(&sh, q, &host)?;
            }
        }
        for w in &exp.workloads {
            let WorkloadPlan::Tcp(t) = w else { continue };
            for (i, &(src, dst)) in t.flows.iter().enumerate() {
                if let TcpKind::App(kind) = &t.kind {
                    // An application machine, on its own event loop (loadgen/apps.rs).
                    let m = AppMachine::new(kind, (t.index, i), (src, dst), t.start, t.stop, seed);
                    let e = apps::AppEntry {
                        workload: t.index,
                        entry: i,
                        server: host(src)?,
                        client: host(dst)?,
                        server_name: exp.node_names[src as usize].clone(),
                        client_name: exp.node_names[dst as usize].clone(),
                        cfg: t.cfg.clone(),
                    };
                    let s = sh.clone();
                    if !spawn(&sh, move || apps::run(&s, e, m)) {
                        sh.skipped.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                let g = Gen {
                    workload: t.index,
                    src,
                    dst,
                    src_host: host(src)?,
                    dst_addr: host_ip(&*host(dst)?, t.cfg.ipv6),
                    cfg: t.cfg.clone(),
                    kind: t.kind.clone(),
                    stop: t.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX),
                };
                let s = sh.clone();
                let gen = Generator::new(t, i, seed);
                if !spawn(&sh, move || generator(&s, &g, gen)) {
                    sh.skipped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(Loadgen {
            sh,
            prev_delivered: Vec::new(),
        })
    }

    /// Time since the run's time zero.
    pub fn now(&self) -> Time {
        self.sh.now()
    }

    /// Asks every generator and connection to stop.
    pub fn stop(&self) {
        self.sh.stop.store(true, Ordering::SeqCst);
    }

    /// Samples every live flow into `ts` at `now`: goodput over the last `dt` and the
    /// sender's TCP_INFO under the simulator's metric names.
    pub fn sample(&mut self, ts: &mut TimeSeries, now: Time, dt: Duration) {
        // Application samples taken up to now, at their own times, before the flows' rows.
        for (t, e, m, v) in take_app_samples(&self.sh, now) {
            ts.push(t, &e, m, v);
        }
        let live: Vec<(u32, Arc<OwnedFd>)> = self.sh.live.lock().unwrap().clone();
        for (flow, fd) in live {
            let Ok(ti) = sock::tcp_info(&fd) else {
                continue;
            };
            let e = format!("flow{flow}");
            let mss = ti.snd_mss as f64;
            ts.push(now, &e, "cwnd_bytes", ti.snd_cwnd as f64 * mss);
            // TCP_INFINITE_SSTHRESH (0x7fffffff) means "not yet set".
            if ti.snd_ssthresh < 0x7fff_ffff {
                ts.push(now, &e, "ssthresh_bytes", ti.snd_ssthresh as f64 * mss);
            }
            if ti.rtt_us > 0 {
                ts.push(now, &e, "srtt_ms", ti.rtt_us as f64 * 1e-3);
            }
            ts.push(now, &e, "pacing_rate_bps", ti.pacing_rate as f64 * 8.0);
            // tcp_packets_in_flight(): unacked − (sacked + lost) + retrans.
            let inflight =
                (ti.unacked as i64 - ti.sacked as i64 - ti.lost as i64 + ti.retrans as i64).max(0);
            ts.push(now, &e, "inflight_bytes", inflight as f64 * mss);
            ts.push(now, &e, "retransmits", ti.total_retrans as f64);
        }
        let flows = self.sh.flows.lock().unwrap();
        self.prev_delivered.resize(flows.len(), 0);
        let dts = dt.as_secs_f64();
        for (f, rec) in flows.iter().enumerate() {
            if rec.end.is_some_and(|e| e + dt < now) || rec.start > now {
                continue;
            }
            let d = rec.delivered_bytes - self.prev_delivered[f].min(rec.delivered_bytes);
            self.prev_delivered[f] = rec.delivered_bytes;
            if now > Time::ZERO && dts > 0.0 {
                ts.push(
                    now,
                    &format!("flow{f}"),
                    "goodput_bps",
                    d as f64 * 8.0 / dts,
                );
            }
        }
    }

    /// Stops the load, waits (bounded) for every thread and returns the flow records.
    /// The connections made so far from number `from` on (in order; the list only grows).
    pub fn conns_from(&self, from: usize) -> Vec<ConnKey> {
        let c = self.sh.conn_keys.lock().unwrap();
        c.get(from..).map(<[ConnKey]>::to_vec).unwrap_or_default()
    }

    pub fn finish(self, wait: std::time::Duration) -> LoadResult {
        self.stop();
        let deadline = Instant::now() + wait;
        while self.sh.threads.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let lingering = self.sh.threads.load(Ordering::SeqCst);
        if lingering > 0 {
            self.sh
                .note(format!("{lingering} load threads still running at the end"));
        }
        let mut apps = std::mem::take(&mut *self.sh.apps.lock().unwrap());
        apps.sort_by_key(|a| (a.0, a.1));
        let mut app_series = TimeSeries::default();
        for (t, e, m, v) in take_app_samples(&self.sh, Time::MAX) {
            app_series.push(t, &e, m, v);
        }
        LoadResult {
            apps: (!apps.is_empty())
                .then(|| serde_json::Value::Array(apps.into_iter().map(|a| a.2).collect())),
            app_series,
            flows: self.sh.flows.lock().unwrap().clone(),
            skipped_flows: self.sh.skipped.load(Ordering::Relaxed),
            errors: self.sh.errors.lock().unwrap().clone(),
            error_count: self.sh.error_count.load(Ordering::Relaxed),
            behind: self.sh.behind.lock().unwrap().clone(),
            conns: self.sh.conn_keys.lock().unwrap().clone(),
            probes: probe::columns(&self.sh.probes, self.sh.end),
        }
    }
}

/// The application samples taken at or before `upto`, in time order (taken out).
fn take_app_samples(sh: &Shared, upto: Time) -> Vec<(Time, String, &'static str, f64)> {
    let mut all = sh.app_samples.lock().unwrap();
    let (mut due, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|s| s.0 <= upto);
    *all = rest;
    due.sort_by_key(|s| s.0);
    due
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::EINPROGRESS) | Some(libc::EALREADY)
    )
}

fn read(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is writable for buf.len() bytes.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn write(fd: &OwnedFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is readable for buf.len() bytes. MSG_NOSIGNAL: a reset peer gives EPIPE,
    // not SIGPIPE.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Writes `n` bytes (bounded by the run's end); returns the bytes written.
fn write_bytes(sh: &Shared, fd: &OwnedFd, n: u64) -> io::Result<u64> {
    let mut left = n;
    while left > 0 {
        if sh.stopped() {
            break;
        }
        match write(fd, &ZEROS[..(left.min(CHUNK as u64)) as usize]) {
            Ok(k) => left -= k as u64,
            Err(e) if is_timeout(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n - left)
}

/// A TCP socket in `g`'s source host, bound and registered for `conn`, connected to the
/// destination's server. Returns None (and notes why) if the run ends first or it fails.
fn tcp_connect(
    sh: &Arc<Shared>,
    g: &Gen,
    conn: Conn,
) -> Option<(Arc<OwnedFd>, Arc<Conn>, SocketAddr)> {
    let flow = conn.flow;
    let res = (|| -> io::Result<(OwnedFd, Arc<Conn>, SocketAddr)> {
        let fd = g.src_host.ns.socket_for(g.cfg.ipv6, libc::SOCK_STREAM)?;
        tcp_options(&fd, &g.cfg)?;
        sock::set_timeouts(&fd, POLL)?;
        sock::bind(&fd, SocketAddr::new(host_ip(&g.src_host, g.cfg.ipv6), 0))?;
        let local = sock::local_addr(&fd)?;
        let conn = Arc::new(conn);
        sh.conns.lock().unwrap().insert(local, conn.clone());
        let peer = SocketAddr::new(g.dst_addr, SERVER_PORT);
        sh.conn_keys.lock().unwrap().push(ConnKey {
            key: flow_key(local, peer, 6),
            flow,
            reply_flow: match conn.kind {
                ConnKind::Rr { resp_flow, .. } => resp_flow,
                ConnKind::Sink { .. } => flow,
            },
        });
        loop {
            match sock::connect(&fd, peer) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EISCONN) => break,
                Err(e) if is_timeout(&e) => {
                    if sh.stopped() {
                        sh.conns.lock().unwrap().remove(&local);
                        return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
                    }
                }
                Err(e) => {
                    sh.conns.lock().unwrap().remove(&local);
                    return Err(e);
                }
            }
        }
        Ok((fd, conn, local))
    })();
    match res {
        Ok((fd, conn, local)) => Some((Arc::new(fd), conn, local)),
        Err(e) => {
            if !sh.stopped() {
                sh.error(format!("flow {flow}: connect: {e}"));
            }
            None
        }
    }
}

/// A client socket's settings from the workload's transport, before connect.
fn tcp_options(fd: &OwnedFd, cfg: &TcpConfig) -> io::Result<()> {
    sock::set_congestion(fd, kernel_cc(cfg))?;
    // The mark goes on before connect so the SYN carries it too (and every data
    // segment and ACK after, as in the simulator).
    mark(fd, cfg.ipv6, cfg.dscp)?;
    // sojourn's `mss` is the payload of a full segment; Linux's TCP_MAXSEG is the MSS
    // before options (tcp_current_mss takes the timestamps option off it), so the
    // option bytes go on top. Only a value other than what the MTU gives is set.
    let opt = if cfg.timestamps {
        sojourn_experiment::transport::TIMESTAMP_OPTION_BYTES
    } else {
        0
    };
    if cfg.mss != cfg.mtu - cfg.ip_tcp_header_bytes() - opt {
        sock::set_maxseg(fd, cfg.mss + opt)?;
    }
    Ok(())
}

/// Final TCP_INFO of a sender: retransmissions, RTOs, CE-marked deliveries, segments.
fn account_sender(sh: &Shared, flow: u32, fd: &OwnedFd) {
    if let Ok(ti) = sock::tcp_info(fd) {
        sh.with_flow(flow, |r| {
            r.retransmits += ti.total_retrans as u64;
            r.rtos += ti.total_rto as u64;
            r.pkts_sent += ti.segs_out as u64;
            r.pkts_ce += ti.delivered_ce as u64;
        });
    }
}

fn unlive(sh: &Shared, flow: u32) {
    sh.live.lock().unwrap().retain(|(f, _)| *f != flow);
}

fn new_tcp_flow(sh: &Shared, g: &Gen, size: u64, start: Time) -> u32 {
    let mut rec = FlowRecord::new(0, FlowKind::Tcp, g.workload, g.src, g.dst, start);
    rec.cc = g.cfg.cc.name();
    rec.size_bytes = size;
    sh.add_flow(rec)
}

/// One connection carrying `size` bytes (0 = until the end: bulk); returns when the
/// receiving application has them all (the completion time) or the run ends.
fn tcp_transfer(sh: &Arc<Shared>, g: &Gen, size: u64) -> Option<Time> {
    let start = sh.now();
    let flow = new_tcp_flow(sh, g, size, start);
    let conn = Conn {
        flow,
        kind: ConnKind::Sink { size },
        cc: kernel_cc(&g.cfg),
        dscp: g.cfg.dscp,
        done: Mutex::new(None),
        cv: Condvar::new(),
    };
    let (fd, conn, local) = tcp_connect(sh, g, conn)?;
    let t = sh.now();
    sh.with_flow(flow, |r| r.first_byte = Some(t));
    sh.live.lock().unwrap().push((flow, fd.clone()));
    let want = if size == 0 { u64::MAX } else { size };
    if let Err(e) = write_bytes(sh, &fd, want) {
        sh.error(format!("flow {flow}: write: {e}"));
    }
    let mut end = None;
    if size > 0 {
        // SAFETY: shutdown(2) of our socket: the FIN follows the data.
        unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) };
        let mut d = conn.done.lock().unwrap();
        while d.is_none() && !sh.stopped() {
            d = conn.cv.wait_timeout(d, POLL).unwrap().0;
        }
        end = *d;
    }
    account_sender(sh, flow, &fd);
    unlive(sh, flow);
    sh.conns.lock().unwrap().remove(&local);
    end
}

/// One request/response transaction on a new connection; returns the times the server
/// had the whole request and the client the whole response.
fn tcp_transaction(sh: &Arc<Shared>, g: &Gen, request: u64, response: u64) -> Option<(Time, Time)> {
    let start = sh.now();
    // The request's record carries no size; the transaction's FCT is the response's
    // (as in the simulator, docs/transport.md).
    let req_flow = new_tcp_flow(sh, g, 0, start);
    let mut rec = FlowRecord::new(0, FlowKind::Tcp, g.workload, g.dst, g.src, start);
    rec.cc = g.cfg.cc.name();
    rec.size_bytes = response;
    let resp_flow = sh.add_flow(rec);
    let conn = Conn {
        flow: req_flow,
        kind: ConnKind::Rr {
            request,
            response,
            resp_flow,
        },
        cc: kernel_cc(&g.cfg),
        dscp: g.cfg.dscp,
        done: Mutex::new(None),
        cv: Condvar::new(),
    };
    let (fd, conn, local) = tcp_connect(sh, g, conn)?;
    let t = sh.now();
    sh.with_flow(req_flow, |r| r.first_byte = Some(t));
    sh.live.lock().unwrap().push((req_flow, fd.clone()));
    let mut end = None;
    match write_bytes(sh, &fd, request) {
        Ok(n) if n == request => {
            let mut got = 0u64;
            let mut buf = vec![0u8; CHUNK];
            while got < response && !sh.stopped() {
                match read(&fd, &mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        got += n as u64;
                        let now = sh.now();
                        sh.with_flow(resp_flow, |r| {
                            r.delivered_bytes = got.min(response);
                            if got >= response {
                                r.end = Some(now);
                            }
                        });
                        if got >= response {
                            end = Some(now);
                        }
                    }
                    Err(e) if is_timeout(&e) => continue,
                    Err(e) => {
                        sh.error(format!("flow {resp_flow}: read: {e}"));
                        break;
                    }
                }
            }
        }
        Ok(_) => {}
        Err(e) => sh.error(format!("flow {req_flow}: write: {e}")),
    }
    account_sender(sh, req_flow, &fd);
    unlive(sh, req_flow);
    sh.conns.lock().unwrap().remove(&local);
    let req_done = (*conn.done.lock().unwrap())?;
    Some((req_done, end?))
}

/// A thin stream over TCP: one `message` every interval on one connection.
fn tcp_thin(sh: &Arc<Shared>, g: &Gen, message: u32, interval: &IntervalDist, rng: &mut Rng) {
    let start = sh.now();
    let flow = new_tcp_flow(sh, g, 0, start);
    let conn = Conn {
        flow,
        kind: ConnKind::Sink { size: 0 },
        cc: kernel_cc(&g.cfg),
        dscp: g.cfg.dscp,
        done: Mutex::new(None),
        cv: Condvar::new(),
    };
    let Some((fd, _conn, local)) = tcp_connect(sh, g, conn) else {
        return;
    };
    let connected = sh.now();
    sh.with_flow(flow, |r| r.first_byte = Some(connected));
    sh.live.lock().unwrap().push((flow, fd.clone()));
    // sojourn-sim: the first message is due at the fire time, written once established.
    let mut next_at = start.max(connected);
    while next_at < g.stop && sh.sleep_until(next_at) {
        if let Err(e) = write_bytes(sh, &fd, message as u64) {
            sh.error(format!("flow {flow}: write: {e}"));
            break;
        }
        next_at += interval.draw(rng);
    }
    account_sender(sh, flow, &fd);
    unlive(sh, flow);
    sh.conns.lock().unwrap().remove(&local);
}

/// Runs one sans-IO workload [`Generator`]: sleeps to each scheduled wake-up, performs
/// the opens it asks for, and reports completions of the transfers it watches.
fn generator(sh: &Arc<Shared>, g: &Gen, mut gen: Generator) {
    let Some(first) = gen.start() else { return };
    let mut wake = Some(first);
    while let Some(t) = wake {
        if !sh.sleep_until(t) {
            return;
        }
        // The scheduled time, not the (slightly later) wake-up: open-loop arrivals keep
        // the simulator's times exactly.
        let step = gen.wake(t);
        wake = step.wake_at;
        let Some(open) = step.open else { continue };
        if open.report_completion {
            // A closed loop: run the transfer (or transaction) here, then report.
            match perform_watched(sh, g, &mut gen, &open) {
                Some(next) => wake = next,
                None => return,
            }
        } else if wake.is_some() {
            // An open loop keeps its schedule: the transfer runs on its own thread.
            let (s, gg) = (sh.clone(), g.clone());
            if !spawn(sh, move || perform(&s, &gg, open)) {
                sh.skipped.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            perform(sh, g, open);
        }
    }
}

/// An open the generator does not wait for: bulk, a sized transfer, a thin stream.
fn perform(sh: &Arc<Shared>, g: &Gen, open: Open) {
    match open.payload {
        Payload::Bulk => {
            tcp_transfer(sh, g, 0);
        }
        Payload::Sized(n) => {
            tcp_transfer(sh, g, n);
        }
        Payload::Messages {
            message_bytes,
            interval,
            udp,
            stop,
            mut rng,
        } => {
            let g = Gen {
                stop: stop.min(g.stop),
                ..g.clone()
            };
            if udp {
                udp_thin(sh, &g, message_bytes, &interval, &mut rng);
            } else {
                tcp_thin(sh, &g, message_bytes, &interval, &mut rng);
            }
        }
    }
}

/// A transfer the generator waits for (actors; request/response transactions). Returns
/// the generator's next wake-up, or None if the run ended first.
fn perform_watched(
    sh: &Arc<Shared>,
    g: &Gen,
    gen: &mut Generator,
    open: &Open,
) -> Option<Option<sojourn_core::Time>> {
    let Payload::Sized(size) = open.payload else {
        perform(sh, g, open.clone());
        return Some(None);
    };
    if matches!(g.kind, TcpKind::RequestResponse { .. }) {
        // The response's size is the generator's next answer; a clone tells it now (sizes
        // do not depend on time), so the server knows what to send when the request is in.
        let response = match gen.clone().finished(sojourn_core::Time::ZERO).open {
            Some(Open {
                payload: Payload::Sized(r),
                ..
            }) => r,
            _ => 1,
        };
        let (req_done, resp_done) = tcp_transaction(sh, g, size, response)?;
        gen.finished(req_done);
        Some(gen.finished(resp_done).wake_at)
    } else {
        let done = tcp_transfer(sh, g, size)?;
        Some(gen.finished(done).wake_at)
    }
}

/// The TCP server of a destination host: accepts on port 5201 and serves each connection
/// on its own thread, identifying the flow by the client's address.
fn start_tcp_server(sh: &Arc<Shared>, host: Arc<Host>, v6: bool) -> io::Result<()> {
    let fd = host.ns.socket_for(v6, libc::SOCK_STREAM)?;
    sock::set_reuseaddr(&fd)?;
    sock::bind(&fd, SocketAddr::new(host_ip(&host, v6), SERVER_PORT))?;
    sock::listen(&fd, 4096)?;
    sock::set_timeouts(&fd, POLL)?;
    let s = sh.clone();
    let ok = spawn(sh, move || {
        while !s.stopped() {
            // SAFETY: accept4 fills at most len bytes of addr.
            let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            let c = unsafe {
                libc::accept4(
                    fd.as_raw_fd(),
                    &mut addr as *mut _ as *mut libc::sockaddr,
                    &mut len,
                    libc::SOCK_CLOEXEC,
                )
            };
            if c < 0 {
                let e = io::Error::last_os_error();
                if !is_timeout(&e) && e.raw_os_error() != Some(libc::ECONNABORTED) {
                    s.error(format!("accept: {e}"));
                    std::thread::sleep(POLL);
                }
                continue;
            }
            // SAFETY: accept4 returned a new fd that we now own.
            let cfd = unsafe { OwnedFd::from_raw_fd(c) };
            let conn = sock::from_sockaddr(&addr)
                .and_then(|peer| s.conns.lock().unwrap().get(&peer).cloned());
            let s2 = s.clone();
            if !spawn(&s, move || serve(&s2, cfd, conn, v6)) {
                s.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    if !ok {
        return Err(io::Error::other("cannot start the TCP server thread"));
    }
    Ok(())
}

fn serve(sh: &Arc<Shared>, fd: OwnedFd, conn: Option<Arc<Conn>>, v6: bool) {
    let _ = sock::set_timeouts(&fd, POLL);
    let Some(conn) = conn else {
        sh.error("a connection from an unregistered address".into());
        return;
    };
    // The accepted socket inherits the listener's (unmarked) TOS: the server's ACKs and
    // responses get the workload's mark here. Its SYN-ACK left before, unmarked.
    if let Err(e) = mark(&fd, v6, conn.dscp) {
        sh.error(format!("flow {}: IP_TOS: {e}", conn.flow));
    }
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    let (need, size) = match conn.kind {
        ConnKind::Sink { size } => (u64::MAX, size),
        ConnKind::Rr { request, .. } => (request, request),
    };
    // Read until end of file (sink) or the whole request (request/response).
    while got < need && !sh.stopped() {
        match read(&fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got += n as u64;
                let now = sh.now();
                let complete = size > 0 && got >= size;
                sh.with_flow(conn.flow, |r| {
                    r.delivered_bytes = got;
                    if complete && r.end.is_none() {
                        r.end = Some(now);
                    }
                });
                if complete {
                    conn.complete(now);
                }
            }
            Err(e) if is_timeout(&e) => continue,
            Err(e) => {
                if !sh.stopped() {
                    sh.error(format!("flow {}: server read: {e}", conn.flow));
                }
                break;
            }
        }
    }
    if let ConnKind::Rr {
        request,
        response,
        resp_flow,
    } = conn.kind
    {
        if got >= request {
            // The response is sent by the server's socket: give it the workload's cc.
            if let Err(e) = sock::set_congestion(&fd, conn.cc) {
                sh.error(format!("flow {resp_flow}: TCP_CONGESTION: {e}"));
            }
            let t = sh.now();
            sh.with_flow(resp_flow, |r| r.first_byte = Some(t));
            sh.live
                .lock()
                .unwrap()
                .push((resp_flow, Arc::new(dup(&fd))));
            if let Err(e) = write_bytes(sh, &fd, response) {
                sh.error(format!("flow {resp_flow}: write: {e}"));
            }
            // Wait for the client to close (bounded).
            while !sh.stopped() {
                match read(&fd, &mut buf) {
                    Ok(0) => break,
                    Ok(_) => continue,
                    Err(e) if is_timeout(&e) => continue,
                    Err(_) => break,
                }
            }
            account_sender(sh, resp_flow, &fd);
            unlive(sh, resp_flow);
            return;
        }
    }
    if let Ok(ti) = sock::tcp_info(&fd) {
        sh.with_flow(conn.flow, |r| r.pkts_sent += ti.segs_out as u64);
    }
}

/// Sets a TCP socket's DSCP (IP_TOS / IPV6_TCLASS = DSCP << 2). Linux keeps the ECN
/// field of a stream socket under TCP's control whatever the option says
/// (net/ipv4/ip_sockglue.c), so the ECN bits are left zero here.
fn mark(fd: &OwnedFd, v6: bool, dscp: u8) -> io::Result<()> {
    if dscp == 0 {
        return Ok(());
    }
    if v6 {
        sock::set_tclass(fd, dscp << 2)
    } else {
        sock::set_tos(fd, dscp << 2)
    }
}

fn dup(fd: &OwnedFd) -> OwnedFd {
    fd.try_clone().expect("dup of a socket")
}

/// Datagram payload header: flow id, sequence number, send time (ns since time zero).
const UDP_HEADER: usize = 20;

/// A UDP socket of `flow` from `src` connected to `dst`'s sink (over IPv6 if `dst` is).
fn udp_socket(sh: &Shared, flow: u32, src: &Host, dst: IpAddr, tos: u8) -> io::Result<OwnedFd> {
    let v6 = dst.is_ipv6();
    let fd = src.ns.socket_for(v6, libc::SOCK_DGRAM)?;
    if tos != 0 {
        if v6 {
            sock::set_tclass(&fd, tos)?;
        } else {
            sock::set_tos(&fd, tos)?;
        }
    }
    sock::set_timeouts(&fd, POLL)?;
    sock::bind(&fd, SocketAddr::new(host_ip(src, v6), 0))?;
    let peer = SocketAddr::new(dst, UDP_PORT);
    sock::connect(&fd, peer)?;
    let local = sock::local_addr(&fd)?;
    sh.conn_keys.lock().unwrap().push(ConnKey {
        key: flow_key(local, peer, 17),
        flow,
        reply_flow: flow,
    });
    Ok(fd)
}

fn send_datagram(sh: &Shared, fd: &OwnedFd, buf: &mut [u8], flow: u32, seq: u64) -> bool {
    let t = sh.now();
    buf[0..4].copy_from_slice(&flow.to_le_bytes());
    buf[4..12].copy_from_slice(&seq.to_le_bytes());
    buf[12..20].copy_from_slice(&t.0.to_le_bytes());
    // ENOBUFS/EAGAIN: the host's own queue is full; the datagram is lost at the sender
    // as it would be with a real application.
    write(fd, buf).is_ok()
}

/// A CBR or on/off source (sojourn-sim udp.rs `UdpSource`), paced on the schedule (a
/// late wake-up sends what is due at once, so the rate does not drift).
fn udp_source(sh: &Arc<Shared>, u: &UdpPlan, flow: u32, src: &Host, dst: Ipv4Addr, mut rng: Rng) {
    let tos = (u.dscp << 2) | if u.ecn { 0b10 } else { 0 };
    let fd = match udp_socket(sh, flow, src, IpAddr::V4(dst), tos) {
        Ok(fd) => fd,
        Err(e) => {
            sh.error(format!("flow {flow}: udp socket: {e}"));
            return;
        }
    };
    let payload = (u.packet_bytes - UDP_OVERHEAD_BYTES).max(UDP_HEADER as u32) as usize;
    let mut buf = vec![0u8; payload];
    let gap = sojourn_core::time::tx_time(u.packet_bytes as u64, u.rate_bps);
    let start = Time::ZERO + u.start;
    let stop = u
        .stop
        .map(|s| Time::ZERO + s)
        .unwrap_or(Time::MAX)
        .min(sh.end);
    let draw = |d: Duration, rng: &mut Rng| match u.onoff {
        OnOff::Exponential { .. } => Duration::from_secs_f64(rng.exp(d.as_secs_f64())),
        _ => d,
    };
    let mut on_until = match u.onoff {
        OnOff::Exponential { on, .. } | OnOff::Fixed { on, .. } => start + draw(on, &mut rng),
        OnOff::Always => Time::MAX,
    };
    let mut next = start;
    let mut seq = 0u64;
    let mut sent = 0u64;
    while next < stop {
        if next >= on_until {
            if let OnOff::Exponential { on, off } | OnOff::Fixed { on, off } = u.onoff {
                let resume = next + draw(off, &mut rng);
                on_until = resume + draw(on, &mut rng);
                next = resume;
                continue;
            }
        }
        if !sh.sleep_until(next) {
            break;
        }
        if send_datagram(sh, &fd, &mut buf, flow, seq) {
            sent += 1;
        }
        seq += 1;
        next += gap;
    }
    // A source that cannot send at its rate is late on every wake-up and sends what is
    // due back to back; at the run's end the datagrams still due were never offered, nor
    // were those the sending host's kernel refused (its socket or device queue full).
    // Counted when they exceed 1 % (a last wake-up's worth is always left).
    let due_at_end = sh.now().min(stop);
    let unsent = due_at_end.saturating_since(next).as_ns() / gap.as_ns().max(1);
    let due = seq + unsent;
    if (due - sent) * 100 > due {
        sh.behind.lock().unwrap().push((flow, sent, due));
    }
    sh.with_flow(flow, |r| r.pkts_sent += sent);
}

/// A thin stream over UDP: every interval one message in datagrams of at most MTU − 28
/// payload bytes (sojourn-sim udp.rs `ThinUdpSource`).
fn udp_thin(sh: &Arc<Shared>, g: &Gen, message: u32, interval: &IntervalDist, rng: &mut Rng) {
    let start = sh.now();
    let flow = sh.add_flow(FlowRecord::new(
        0,
        FlowKind::UdpThin,
        g.workload,
        g.src,
        g.dst,
        start,
    ));
    let fd = match udp_socket(sh, flow, &g.src_host, g.dst_addr, 0) {
        Ok(fd) => fd,
        Err(e) => {
            sh.error(format!("flow {flow}: udp socket: {e}"));
            return;
        }
    };
    let max_payload = g.cfg.mtu - 28;
    let mut buf = vec![0u8; max_payload as usize];
    let mut next_at = start;
    let mut seq = 0u64;
    let mut sent = 0u64;
    while next_at < g.stop && sh.sleep_until(next_at) {
        let mut left = message;
        while left > 0 {
            let p = left.min(max_payload);
            left -= p;
            let n = (p as usize).max(UDP_HEADER);
            if send_datagram(sh, &fd, &mut buf[..n], flow, seq) {
                sent += 1;
            }
            seq += 1;
        }
        next_at += interval.draw(rng);
    }
    sh.with_flow(flow, |r| r.pkts_sent += sent);
}

/// The UDP sink of a destination host: counts payload bytes and one-way delay per flow.
fn start_udp_sink(sh: &Arc<Shared>, host: Arc<Host>, v6: bool) -> io::Result<()> {
    let fd = host.ns.socket_for(v6, libc::SOCK_DGRAM)?;
    sock::bind(&fd, SocketAddr::new(host_ip(&host, v6), UDP_PORT))?;
    sock::set_timeouts(&fd, POLL)?;
    let s = sh.clone();
    let ok = spawn(sh, move || {
        let mut buf = vec![0u8; 65_536];
        while !s.stopped() {
            match read(&fd, &mut buf) {
                Ok(n) if n >= UDP_HEADER => {
                    let now = s.now();
                    let flow = u32::from_le_bytes(buf[0..4].try_into().unwrap());
                    let sent = u64::from_le_bytes(buf[12..20].try_into().unwrap());
                    let delay = now.0.saturating_sub(sent);
                    let mut f = s.flows.lock().unwrap();
                    if let Some(r) = f.get_mut(flow as usize) {
                        r.delivered_bytes += n as u64;
                        r.delay_sum_ns += delay as u128;
                        r.delay_count += 1;
                        r.delay_max_ns = r.delay_max_ns.max(delay);
                    }
                }
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(e) => {
                    s.error(format!("udp sink: {e}"));
                    std::thread::sleep(POLL);
                }
            }
        }
    });
    if !ok {
        return Err(io::Error::other("cannot start the UDP sink thread"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_of_congestion_controls() {
        // Linux calls NewReno "reno" (net/ipv4/tcp_cong.c tcp_reno).
        use sojourn_experiment::transport::CcKind;
        let with = |cc| TcpConfig {
            cc,
            ..TcpConfig::default()
        };
        assert_eq!(kernel_cc(&with(CcKind::NewReno)), "reno");
        assert_eq!(kernel_cc(&with(CcKind::Cubic)), "cubic");
        assert_eq!(kernel_cc(&with(CcKind::Bbr)), "bbr");
    }
}
