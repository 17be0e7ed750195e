//! Network namespaces, veth pairs and their settings for one live run, removed on every exit
//! path.
//!
//! Mechanism (docs/emulate.md "Namespaces"): topology changes go through the `ip` program
//! of iproute2 (always present where namespaces are used, and `ip netns add` is the one
//! agreed way to create a *named* namespace: it bind-mounts `/run/netns/NAME`, which other
//! tools and `--cleanup` can find again); per-namespace work that iproute2 does not do —
//! sysctls and NIC offloads — runs in a short-lived thread that `setns(2)`s into the
//! namespace, so it touches only that namespace and needs no `ethtool` or `sysctl` program:
//! offloads use the `SIOCETHTOOL` ioctl's legacy per-feature commands, sysctls are writes
//! to `/proc/sys/net/...` (which resolve against the writing thread's namespace).
//!
//! Names are unique per run: `sj` + 6 random hex digits (the *run id*) + a role, so runs
//! of several users on one machine never collide; interface names fit IFNAMSIZ (15 bytes).
//! Veth pairs are created with both ends directly inside their namespaces
//! (`ip link add A netns N1 type veth peer name B netns N2`), so the host's own namespace
//! never holds a device of ours, not even for a moment. Deleting a namespace destroys the
//! veth ends inside it and with them their peers, so cleanup is "delete our namespaces".
//!
//! Every run writes a state file `/run/sojourn/<run id>.state` (or under
//! `/tmp/sojourn-emu/` if `/run` is not writable) listing the owner pid and each namespace
//! as it is created, *before* creating it. [`Guard`] deletes what it created on drop;
//! [`cleanup_stale`] deletes what runs killed by SIGKILL left behind (their pid is dead),
//! and never anything that is not listed in a state file.

use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Longest interface name Linux accepts (IFNAMSIZ − 1).
pub const IFNAME_MAX: usize = 15;

/// An error from a namespace operation: what was being done, and the cause.
#[derive(Debug)]
pub struct NetnsError {
    pub what: String,
    pub cause: String,
}

impl fmt::Display for NetnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.cause)
    }
}

impl std::error::Error for NetnsError {}

pub type Result<T> = std::result::Result<T, NetnsError>;

fn err(what: impl Into<String>, cause: impl fmt::Display) -> NetnsError {
    NetnsError {
        what: what.into(),
        cause: cause.to_string(),
    }
}

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| err(format!("ip {}", args.join(" ")), e))?;
    if !out.status.success() {
        return Err(err(
            format!("ip {}", args.join(" ")),
            String::from_utf8_lossy(&out.stderr).trim(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether this process may create namespaces and devices (effective uid 0 or
/// CAP_NET_ADMIN + CAP_SYS_ADMIN in the effective set).
pub fn have_privilege() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    // CapEff bit 12 = CAP_NET_ADMIN, bit 21 = CAP_SYS_ADMIN (setns/unshare of netns).
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 12) != 0 && caps & (1 << 21) != 0)
}

/// Whether named network namespaces can be created here (privilege, `ip` present, and the
/// kernel lets us). `Err` carries the reason, for tests that skip.
pub fn check_available() -> std::result::Result<(), String> {
    if !have_privilege() {
        return Err("not root (CAP_NET_ADMIN and CAP_SYS_ADMIN are needed)".into());
    }
    let probe = format!("{}probe", new_run_id());
    match ip(&["netns", "add", &probe]) {
        Ok(_) => {
            let _ = ip(&["netns", "delete", &probe]);
            Ok(())
        }
        Err(e) => Err(format!("network namespaces unavailable: {e}")),
    }
}

/// A fresh run id: `sj` + 6 random hex digits (from the kernel's random source).
pub fn new_run_id() -> String {
    let mut b = [0u8; 3];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        // Fall back to time and pid: uniqueness, not secrecy, is what matters.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            ^ std::process::id().rotate_left(13);
        b = [(t >> 16) as u8, (t >> 8) as u8, t as u8];
    }
    format!("sj{:02x}{:02x}{:02x}", b[0], b[1], b[2])
}

/// Directory of the per-run state files: `/run/sojourn` if it can be made, else
/// `/tmp/sojourn-emu`.
pub fn state_dir() -> PathBuf {
    for d in ["/run/sojourn", "/tmp/sojourn-emu"] {
        if fs::create_dir_all(d).is_ok() {
            return PathBuf::from(d);
        }
    }
    PathBuf::from("/tmp")
}

/// A MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// A locally administered unicast address (bit 1 of the first octet set, bit 0 clear)
    /// made of a run byte pair and an index: distinct within a run.
    pub fn local(run_tag: u16, index: u16) -> Mac {
        Mac([
            0x02,
            0x5a,
            (run_tag >> 8) as u8,
            run_tag as u8,
            (index >> 8) as u8,
            index as u8,
        ])
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Offload settings of one device. `None` leaves a feature as the kernel has it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    /// Transmit checksum offload. Must be off on a host's veth whose frames cross the
    /// AF_PACKET forwarder: otherwise they leave with a partial checksum
    /// (CHECKSUM_PARTIAL), which the forwarder would pass on and the receiver drop.
    /// The kernel then also turns scatter-gather, TSO and GSO off (they need it).
    pub tx_checksum: Option<bool>,
    pub scatter_gather: Option<bool>,
    pub tso: Option<bool>,
    pub gso: Option<bool>,
    pub gro: Option<bool>,
}

impl Offloads {
    /// Everything off: MTU-sized frames with complete checksums (the forwarder's default).
    pub const ALL_OFF: Offloads = Offloads {
        tx_checksum: Some(false),
        scatter_gather: Some(false),
        tso: Some(false),
        gso: Some(false),
        gro: Some(false),
    };

    /// GSO buffers end to end: the host's TCP hands whole buffers (with a partial checksum)
    /// to the veth, and the forwarder's `PACKET_VNET_HDR` ports pass them on whole. GRO
    /// stays off: a veth has no NAPI without it (docs/emulate.md "Datapath").
    pub const GSO_BUFFERS: Offloads = Offloads {
        tx_checksum: Some(true),
        scatter_gather: Some(true),
        tso: Some(true),
        gso: Some(true),
        gro: Some(false),
    };
}

/// The offload state read back from a device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadState {
    pub tx_checksum: bool,
    pub scatter_gather: bool,
    pub tso: bool,
    pub gso: bool,
    pub gro: bool,
}

// Legacy ethtool commands (include/uapi/linux/ethtool.h); still honoured by 6.x kernels,
// which map them onto the netdev feature bits.
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_GSG: u32 = 0x18;
const ETHTOOL_SSG: u32 = 0x19;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

fn ethtool_value(fd: i32, dev: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let mut v = EthtoolValue { cmd, data };
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: (&mut v as *mut EthtoolValue).cast(),
        _pad: [0; 16],
    };
    for (i, b) in dev.bytes().take(IFNAME_MAX).enumerate() {
        req.name[i] = b as libc::c_char;
    }
    // SAFETY: req is a valid ifreq whose data points at a live ethtool_value.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.data)
}

fn ioctl_socket() -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: plain socket(2) call; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh, valid descriptor we own.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Sets `dev`'s offloads in the calling thread's namespace and reads them back.
pub fn set_offloads_here(dev: &str, o: Offloads) -> io::Result<OffloadState> {
    let sock = ioctl_socket()?;
    let fd = sock.as_raw_fd();
    // Order matters: checksum first (the others depend on it when turning on, and the
    // kernel drops them when it goes off), GRO last.
    let steps = [
        (o.tx_checksum, ETHTOOL_STXCSUM),
        (o.scatter_gather, ETHTOOL_SSG),
        (o.tso, ETHTOOL_STSO),
        (o.gso, ETHTOOL_SGSO),
        (o.gro, ETHTOOL_SGRO),
    ];
    for (want, cmd) in steps {
        if let Some(on) = want {
            ethtool_value(fd, dev, cmd, on as u32)?;
        }
    }
    Ok(OffloadState {
        tx_checksum: ethtool_value(fd, dev, ETHTOOL_GTXCSUM, 0)? != 0,
        scatter_gather: ethtool_value(fd, dev, ETHTOOL_GSG, 0)? != 0,
        tso: ethtool_value(fd, dev, ETHTOOL_GTSO, 0)? != 0,
        gso: ethtool_value(fd, dev, ETHTOOL_GGSO, 0)? != 0,
        gro: ethtool_value(fd, dev, ETHTOOL_GGRO, 0)? != 0,
    })
}

/// Moves the calling thread into namespace `ns` (`/run/netns/NS`). Only this thread
/// moves; use it at the start of a thread dedicated to the namespace (the forwarder's,
/// a load generator's), never on a thread shared with other work.
pub fn enter(ns: &str) -> Result<()> {
    let path = format!("/run/netns/{ns}");
    let f = fs::File::open(&path).map_err(|e| err(format!("open {path}"), e))?;
    // The filesystem view stays the host's; only the network namespace changes.
    // SAFETY: f is an open namespace file; CLONE_NEWNET restricts the type.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(err(format!("setns into {ns}"), io::Error::last_os_error()));
    }
    Ok(())
}

/// Runs `f` on a new thread inside namespace `ns` and returns its result.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T> {
    let ns_owned = ns.to_string();
    let h = std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || -> Result<T> {
            enter(&ns_owned)?;
            f().map_err(|e| err(format!("in namespace {ns_owned}"), e))
        })
        .map_err(|e| err("spawn namespace thread", e))?;
    h.join()
        .map_err(|_| err(format!("in namespace {ns}"), "thread panicked"))?
}

/// Writes sysctl `key` (dotted, e.g. `net.ipv4.ip_forward`) in namespace `ns`.
pub fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let value = value.to_string();
    in_netns(ns, move || fs::write(&path, value.as_bytes()))
        .map_err(|e| err(format!("sysctl {key} in {ns}"), e.cause))
}

/// Reads sysctl `key` in namespace `ns`.
pub fn sysctl_get(ns: &str, key: &str) -> Result<String> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    in_netns(ns, move || {
        fs::read_to_string(&path).map(|s| s.trim().to_string())
    })
    .map_err(|e| err(format!("read sysctl {key} in {ns}"), e.cause))
}

/// Sets offloads of `dev` in namespace `ns`; returns the state the kernel settled on.
pub fn set_offloads(ns: &str, dev: &str, o: Offloads) -> Result<OffloadState> {
    let d = dev.to_string();
    in_netns(ns, move || set_offloads_here(&d, o))
        .map_err(|e| err(format!("offloads of {dev} in {ns}"), e.cause))
}

/// The settings of one veth end.
#[derive(Clone, Debug)]
pub struct VethEnd {
    /// Namespace (full name, as returned by [`Guard::add_netns`]).
    pub ns: String,
    /// Interface name (≤ 15 bytes).
    pub ifname: String,
    pub mac: Mac,
    /// Addresses with prefix length, e.g. `10.0.1.1/24`; none on a forwarder port.
    pub addrs: Vec<(IpAddr, u8)>,
}

/// Everything one run created; removes it all on drop (namespaces, and with them their
/// veths), then its state file.
pub struct Guard {
    run_id: String,
    namespaces: Vec<String>,
    state_path: PathBuf,
    released: bool,
}

impl Guard {
    /// A new run with a fresh id; writes the state file (pid first).
    pub fn new() -> Result<Guard> {
        Guard::in_dir(&state_dir())
    }

    /// As [`Guard::new`] with the state file in `dir`.
    pub fn in_dir(dir: &Path) -> Result<Guard> {
        let run_id = new_run_id();
        let state_path = dir.join(format!("{run_id}.state"));
        let mut f = fs::File::create(&state_path)
            .map_err(|e| err(format!("create {}", state_path.display()), e))?;
        writeln!(f, "pid {}", std::process::id())
            .map_err(|e| err(format!("write {}", state_path.display()), e))?;
        Ok(Guard {
            run_id,
            namespaces: Vec::new(),
            state_path,
            released: false,
        })
    }

    /// The run id (`sj` + 6 hex digits): the prefix of every name this run creates.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// A 16-bit tag of this run for MAC addresses ([`Mac::local`]).
    pub fn mac_tag(&self) -> u16 {
        u16::from_str_radix(&self.run_id[2..6], 16).unwrap_or(0)
    }

    /// An interface name `<run id><role>`; `role` is cut so the name fits IFNAMSIZ.
    pub fn ifname(&self, role: &str) -> String {
        let mut s = format!("{}{}", self.run_id, role);
        s.truncate(IFNAME_MAX);
        s
    }

    /// Path of this run's state file.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// Namespaces created so far.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    fn record(&self, line: &str) -> Result<()> {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(&self.state_path)
            .map_err(|e| err(format!("open {}", self.state_path.display()), e))?;
        writeln!(f, "{line}")
            .and_then(|_| f.sync_data())
            .map_err(|e| err(format!("write {}", self.state_path.display()), e))
    }

    /// Creates namespace `<run id>-<role>` with its loopback up; returns its name.
    pub fn add_netns(&mut self, role: &str) -> Result<String> {
        let name = format!("{}-{}", self.run_id, role);
        // Recorded before creation: a SIGKILL between the two still gets it cleaned.
        self.record(&format!("netns {name}"))?;
        ip(&["netns", "add", &name])?;
        self.namespaces.push(name.clone());
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        Ok(name)
    }

    /// Creates a veth pair with each end directly in its namespace, sets MACs, MTU and
    /// addresses (IPv6 addresses `nodad`, usable at once), and brings both ends up.
    pub fn add_veth(&mut self, a: &VethEnd, b: &VethEnd, mtu: u32) -> Result<()> {
        for e in [a, b] {
            if e.ifname.len() > IFNAME_MAX {
                return Err(err(
                    format!("interface name {}", e.ifname),
                    "longer than 15 bytes (IFNAMSIZ)",
                ));
            }
        }
        let mtu_s = mtu.to_string();
        let (am, bm) = (a.mac.to_string(), b.mac.to_string());
        ip(&[
            "link", "add", &a.ifname, "netns", &a.ns, "address", &am, "mtu", &mtu_s, "type",
            "veth", "peer", "name", &b.ifname, "netns", &b.ns, "address", &bm, "mtu", &mtu_s,
        ])?;
        for e in [a, b] {
            for (addr, len) in &e.addrs {
                let cidr = format!("{addr}/{len}");
                let mut args = vec!["-n", &e.ns, "addr", "add", &cidr, "dev", &e.ifname];
                if addr.is_ipv6() {
                    args.push("nodad");
                }
                ip(&args)?;
            }
            ip(&["-n", &e.ns, "link", "set", &e.ifname, "up"])?;
        }
        Ok(())
    }

    /// Removes everything now (also done on drop). Returns the first failure, after trying
    /// every namespace.
    pub fn cleanup(&mut self) -> Result<()> {
        let mut first = None;
        for ns in self.namespaces.drain(..).rev() {
            if let Err(e) = delete_netns(&ns) {
                first.get_or_insert(e);
            }
        }
        if first.is_none() {
            let _ = fs::remove_file(&self.state_path);
        }
        self.released = true;
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.released || !self.namespaces.is_empty() {
            if let Err(e) = self.cleanup() {
                eprintln!("sojourn: cleanup of run {}: {e}", self.run_id);
            }
        }
    }
}

/// Deletes namespace `ns` (its devices go with it); a namespace already gone is fine.
pub fn delete_netns(ns: &str) -> Result<()> {
    if !Path::new("/run/netns").join(ns).exists() {
        return Ok(());
    }
    ip(&["netns", "delete", ns]).map(|_| ())
}

/// Adds a permanent neighbour entry in `ns`: `ip` will never ARP/ND for it (the forwarder
/// does not answer ARP).
pub fn neigh_add(ns: &str, dev: &str, addr: IpAddr, mac: Mac) -> Result<()> {
    let (a, m) = (addr.to_string(), mac.to_string());
    ip(&[
        "-n",
        ns,
        "neigh",
        "replace",
        &a,
        "lladdr",
        &m,
        "dev",
        dev,
        "nud",
        "permanent",
    ])
    .map(|_| ())
}

/// Adds a route in `ns`: `prefix` (e.g. `10.0.2.0/24`) through device `dev`, optionally
/// via a gateway (which then needs a neighbour entry).
pub fn route_add(ns: &str, prefix: &str, dev: &str, via: Option<IpAddr>) -> Result<()> {
    let via_s = via.map(|v| v.to_string());
    let mut args = vec!["-n", ns, "route", "replace", prefix];
    if let Some(v) = &via_s {
        args.extend(["via", v.as_str()]);
        if via.is_some_and(|v| v.is_ipv4()) && prefix.contains(':') {
            return Err(err(
                format!("route {prefix} via {v}"),
                "address families differ",
            ));
        }
    }
    args.extend(["dev", dev]);
    if via.is_some() {
        args.push("onlink");
    }
    ip(&args).map(|_| ())
}

/// Makes `ns` a forwarder namespace: no IP forwarding and no IPv6 at all (no router or
/// neighbour solicitations of its own), so the kernel there neither routes nor answers —
/// only the AF_PACKET forwarder moves frames.
pub fn make_forwarder_ns(ns: &str) -> Result<()> {
    sysctl(ns, "net.ipv4.ip_forward", "0")?;
    sysctl(ns, "net.ipv6.conf.all.forwarding", "0")?;
    sysctl(ns, "net.ipv6.conf.default.disable_ipv6", "1")?;
    sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")?;
    Ok(())
}

/// What [`cleanup_stale`] removed.
#[derive(Debug, Default)]
pub struct CleanupReport {
    pub runs: Vec<String>,
    pub namespaces: Vec<String>,
    pub errors: Vec<String>,
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence/permission.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Removes what runs that died without cleaning up left behind: every state file in the
/// state directories whose owner pid is no longer alive. Namespaces not listed in a
/// state file are never touched (other users' runs).
pub fn cleanup_stale() -> CleanupReport {
    let mut rep = CleanupReport::default();
    for dir in ["/run/sojourn", "/tmp/sojourn-emu"] {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for ent in entries.flatten() {
            let path = ent.path();
            if path.extension().and_then(|e| e.to_str()) != Some("state") {
                continue;
            }
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            let pid = text
                .lines()
                .find_map(|l| l.strip_prefix("pid "))
                .and_then(|p| p.trim().parse::<i32>().ok())
                .unwrap_or(0);
            if pid_alive(pid) {
                continue;
            }
            let mut ok = true;
            for ns in text.lines().filter_map(|l| l.strip_prefix("netns ")) {
                let ns = ns.trim();
                // Only names of the form this module makes (defence against a bad file).
                if !ns.starts_with("sj") || ns.contains('/') {
                    continue;
                }
                match delete_netns(ns) {
                    Ok(()) => rep.namespaces.push(ns.to_string()),
                    Err(e) => {
                        ok = false;
                        rep.errors.push(e.to_string());
                    }
                }
            }
            if ok {
                let _ = fs::remove_file(&path);
                rep.runs.push(
                    path.file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                );
            }
        }
    }
    rep
}

/// The interface index of `dev` in the calling thread's namespace.
pub fn ifindex_here(dev: &str) -> io::Result<i32> {
    let c = CString::new(dev).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: c is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(i as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_and_names_fit_ifnamsiz() {
        let id = new_run_id();
        assert_eq!(id.len(), 8);
        assert!(id.starts_with("sj"));
        assert!(id[2..].chars().all(|c| c.is_ascii_hexdigit()));
        let g = Guard {
            run_id: id,
            namespaces: vec![],
            state_path: PathBuf::from("/nonexistent"),
            released: true,
        };
        assert_eq!(g.ifname("fwd-a-long-role").len(), 15);
    }

    #[test]
    fn local_macs_are_unicast_and_locally_administered() {
        let m = Mac::local(0xabcd, 7);
        assert_eq!(m.0[0] & 0x01, 0, "unicast");
        assert_eq!(m.0[0] & 0x02, 0x02, "locally administered");
        assert_eq!(m.to_string(), "02:5a:ab:cd:00:07");
    }
}
