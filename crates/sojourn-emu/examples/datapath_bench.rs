//! Datapath benchmark (root; reports, never asserts): forwarder throughput by I/O mechanism
//! with MTU frames and GSO buffers (TCP through the forwarder with iperf3, one stream,
//! CUBIC) for pfifo and fq_codel, with the kernel's own forwarding as the ceiling; CPU time
//! per packet (the forwarder thread's, and the whole machine's); the rate a TCP flow holds;
//! delivered-rate accuracy with UDP at 1.2x the link rate.
//!
//! ```sh
//! cargo run --release -p sojourn-emu --example datapath_bench            # ~4 min
//! cargo run --release -p sojourn-emu --example datapath_bench -- --short # ~1.5 min
//! # parts and knobs: --only table,rate,udp  --mechanisms mmsg,ring,pin,gro,kernel
//! #                  --qdisc pfifo,fq_codel  --secs 4  --reps 2
//! ```
//! The mechanism table interleaves its runs (every cell once per round, `--reps` rounds)
//! so that old and new meet the same machine load; it prints medians.
//! Needs `iperf3` (Debian package `iperf3`). The machine is shared: the load average is
//! printed with the numbers.

use serde_json::Value as Json;
use sojourn_core::Duration;
use sojourn_emu::afpacket::RxMode;
use sojourn_emu::forward::{self, ForwarderReport};
use sojourn_emu::netns;
use sojourn_emu::testbed::{self, LinkSpec, Testbed};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A way of moving frames through the forwarder namespace (docs/emulate.md, "Forwarder
/// throughput").
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mechanism {
    /// `recvmmsg`/`sendmmsg` batches of 64 (the MTU-frame default).
    Mmsg,
    /// TPACKET_V2 receive ring (the GSO-buffer default).
    Ring,
    /// `Mmsg` with the forwarder thread pinned to CPU 1.
    Pin,
    /// `Mmsg`, and GRO (which gives veth a NAPI context) on the hosts' veths.
    HostGro,
    /// No forwarder: the kernel's own IP forwarding in the forwarder namespace, no
    /// discipline, no delay — the ceiling.
    Kernel,
}

impl Mechanism {
    fn parse(s: &str) -> Mechanism {
        match s {
            "mmsg" => Mechanism::Mmsg,
            "ring" => Mechanism::Ring,
            "pin" => Mechanism::Pin,
            "gro" => Mechanism::HostGro,
            "kernel" => Mechanism::Kernel,
            _ => {
                eprintln!("--mechanisms: unknown {s:?} (mmsg, ring, pin, gro, kernel)");
                std::process::exit(2)
            }
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mechanism::Mmsg => "recvmmsg/sendmmsg",
            Mechanism::Ring => "TPACKET_V2 rx ring + sendmmsg",
            Mechanism::Pin => "recvmmsg/sendmmsg, thread pinned",
            Mechanism::HostGro => "recvmmsg/sendmmsg, GRO on the hosts' veths",
            Mechanism::Kernel => "kernel IP forwarding (no discipline)",
        }
    }
}

/// Busy CPU ns of the whole machine so far (/proc/stat: user … steal, all CPUs).
fn machine_busy_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = s.lines().next().unwrap_or("");
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: u64 = v
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4 && *i < 8)
        .map(|(_, x)| x)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    busy * 1_000_000_000 / hz
}

/// One measurement: iperf3 goodput, and the forwarder's report (none for `Kernel`).
struct Measured {
    gbps: f64,
    retransmits: u64,
    machine_busy_ns: u64,
    load: String,
    rep: Option<ForwarderReport>,
}

/// Runs iperf3 a→b through a forwarder with link `spec` both ways (or the kernel's
/// forwarding when `mech` is `Kernel`).
fn iperf(tb: &Testbed, spec: &LinkSpec, mech: Mechanism, secs: &str) -> Measured {
    let stop = Arc::new(AtomicBool::new(false));
    let mut plan = tb.plan(spec, spec);
    plan.rx = match mech {
        Mechanism::Ring => Some(RxMode::Ring),
        Mechanism::Mmsg | Mechanism::Pin | Mechanism::HostGro => Some(RxMode::Mmsg),
        Mechanism::Kernel => None,
    };
    if mech == Mechanism::Pin {
        plan.cpu = Some(1);
    }
    let h =
        (mech != Mechanism::Kernel).then(|| forward::spawn(plan, stop.clone()).expect("forwarder"));
    let mut server = Command::new("ip")
        .args([
            "netns", "exec", &tb.ns_b, "iperf3", "-s", "-1", "-p", "5201",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server (is iperf3 installed?)");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let busy0 = machine_busy_ns();
    let out = Command::new("ip")
        .args([
            "netns", "exec", &tb.ns_a, "iperf3", "-c", "10.0.2.1", "-p", "5201", "-J", "-t", secs,
            "-C", "cubic",
        ])
        .output()
        .expect("iperf3 client");
    let busy = machine_busy_ns() - busy0;
    let _ = server.wait();
    stop.store(true, Ordering::Relaxed);
    let rep = h.map(|h| h.join().expect("report"));
    let j: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
    Measured {
        gbps: j["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0)
            / 1e9,
        retransmits: j["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
        machine_busy_ns: busy,
        load: load(),
        rep,
    }
}

/// A testbed for `mech` (GSO buffers or MTU frames).
fn testbed_for(mech: Mechanism, gso: bool) -> Testbed {
    let tb = Testbed::with_gso(1500, gso).expect("testbed");
    let sh = |ns: &str, cmd: String| {
        let ok = Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c", &cmd])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("failed in {ns}: {cmd}");
        }
    };
    match mech {
        Mechanism::HostGro => {
            for (ns, role) in [(&tb.ns_a, "a0"), (&tb.ns_b, "b0")] {
                let ifn = tb.guard.ifname(role);
                netns::set_offloads(
                    ns,
                    &ifn,
                    netns::Offloads {
                        gro: Some(true),
                        ..netns::Offloads::default()
                    },
                )
                .expect("GRO on the hosts' veths");
            }
        }
        Mechanism::Kernel => {
            let (pa, pb) = (tb.port_a.ifname.clone(), tb.port_b.ifname.clone());
            sh(&tb.ns_f, format!("ip addr add 10.0.1.254/24 dev {pa} && ip addr add 10.0.2.254/24 dev {pb} && echo 1 > /proc/sys/net/ipv4/ip_forward"));
        }
        _ => {}
    }
    tb
}

fn frames(rep: &ForwarderReport) -> u64 {
    rep.ports.iter().map(|p| p.rx_frames).sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The mechanism table: every mechanism × MTU/GSO × qdisc, `reps` rounds interleaved so
/// that old and new meet the same load; medians.
fn table(mechs: &[Mechanism], qdiscs: &[String], secs: &str, reps: usize) {
    println!("\n# Forwarder throughput by mechanism: one CUBIC stream (iperf3), link 40 Gbit/s, 1 ms each way; median of {reps} interleaved {secs} s runs");
    println!("(segment = one 1448-byte MSS of goodput; frame = what the forwarder received: data frames or GSO buffers, and ACKs)");
    println!("| mechanism | frames | qdisc | goodput Gbit/s | forwarder CPU ns/frame | forwarder CPU ns/segment | forwarder CPU % of the transfer | machine CPU ns/segment | retransmits | load (1 min) |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut cells: Vec<(Mechanism, bool, String)> = Vec::new();
    for gso in [false, true] {
        for &m in mechs {
            if m == Mechanism::Kernel {
                cells.push((m, gso, "none".into()));
            } else {
                for q in qdiscs {
                    cells.push((m, gso, q.clone()));
                }
            }
        }
    }
    let mut beds: Vec<((Mechanism, bool), Testbed)> = Vec::new();
    let mut results: Vec<Vec<Measured>> = cells.iter().map(|_| Vec::new()).collect();
    for _ in 0..reps {
        for (i, (m, gso, q)) in cells.iter().enumerate() {
            let key = (
                if *m == Mechanism::Kernel || *m == Mechanism::HostGro {
                    *m
                } else {
                    Mechanism::Mmsg
                },
                *gso,
            );
            if !beds.iter().any(|(k, _)| *k == key) {
                beds.push((key, testbed_for(key.0, *gso)));
            }
            let tb = &beds.iter().find(|(k, _)| *k == key).unwrap().1;
            let qd = if q == "none" { "pfifo" } else { q.as_str() };
            let spec = LinkSpec::new(40_000_000_000, Duration::from_ms(1), qd);
            results[i].push(iperf(tb, &spec, *m, secs));
        }
    }
    for ((m, gso, q), rs) in cells.iter().zip(&results) {
        let secs_f: f64 = secs.parse().unwrap_or(1.0);
        let segs = |r: &Measured| (r.gbps * 1e9 * secs_f / 8.0 / 1448.0).max(1.0);
        let fwd = |f: &dyn Fn(&ForwarderReport, &Measured) -> f64| {
            let v: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.rep.as_ref().map(|rep| f(rep, r)))
                .collect();
            if v.is_empty() {
                "–".to_string()
            } else {
                format!("{:.0}", median(v))
            }
        };
        println!(
            "| {} | {} | {q} | {:.2} | {} | {} | {} | {:.0} | {} | {} |",
            m.label(),
            if *gso { "GSO buffers" } else { "MTU" },
            median(rs.iter().map(|r| r.gbps).collect()),
            fwd(&|rep, _| rep.cpu_ns as f64 / frames(rep).max(1) as f64),
            // The thread idles before and after the transfer: all its CPU time is the
            // transfer's.
            fwd(&|rep, r| rep.cpu_ns as f64 / segs(r)),
            fwd(&|rep, _| 100.0 * rep.cpu_ns as f64 / (secs_f * 1e9)),
            median(
                rs.iter()
                    .map(|r| r.machine_busy_ns as f64 / segs(r))
                    .collect()
            ),
            rs.iter()
                .map(|r| r.retransmits.to_string())
                .collect::<Vec<_>>()
                .join("/"),
            rs.iter()
                .map(|r| r.load.split(' ').next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let short = args.iter().any(|a| a == "--short");
    let opt = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let secs_s = opt("--secs").unwrap_or_else(|| if short { "2".into() } else { "4".into() });
    let secs = secs_s.as_str();
    let reps: usize = opt("--reps")
        .map(|r| r.parse().expect("--reps N"))
        .unwrap_or(if short { 1 } else { 2 });
    let only = opt("--only").unwrap_or_else(|| "table,rate,udp".into());
    let qdiscs: Vec<String> = opt("--qdisc")
        .unwrap_or_else(|| "pfifo,fq_codel".into())
        .split(',')
        .map(String::from)
        .collect();
    let mechs: Vec<Mechanism> = opt("--mechanisms")
        .unwrap_or_else(|| "mmsg,ring,pin,gro,kernel".into())
        .split(',')
        .map(Mechanism::parse)
        .collect();
    let want = |k: &str| only.split(',').any(|o| o == k);
    if let Err(why) = sojourn_emu::netns::check_available() {
        println!("skipped: {why}");
        return;
    }
    println!("load average at start: {}", load());
    if want("table") {
        table(&mechs, &qdiscs, secs, reps);
    }
    let tb = Testbed::new(1500).expect("testbed");
    if want("rate") {
        println!(
        "\n# Rate held: one CUBIC stream (iperf3) through a pfifo link of rate R, 1 ms each way"
    );
        println!("(the best a TCP flow can get is R x 1448/1514: MSS 1448 with timestamps, 1514-byte frames)");
        println!("| link | goodput Mbit/s | of the maximum | forwarder CPU share | load |");
        println!("|---|---|---|---|---|");
        let tcp_rates: &[u64] = if short {
            &[500_000_000]
        } else {
            &[500_000_000, 1_000_000_000, 1_500_000_000]
        };
        for &r in tcp_rates {
            let spec = LinkSpec::new(r, Duration::from_ms(1), "pfifo");
            let m = iperf(&tb, &spec, Mechanism::Mmsg, secs);
            let rep = m.rep.expect("report");
            let bps = m.gbps * 1e9;
            let max = r as f64 * 1448.0 / 1514.0;
            println!(
                "| {} Mbit/s | {:.1} | {:.1}% | {:.0}% | {} |",
                r / 1_000_000,
                bps / 1e6,
                100.0 * bps / max,
                100.0 * rep.cpu_ns as f64 / rep.duration_ns as f64,
                load()
            );
        }
    }
    if want("udp") {
        println!(
        "\n# Rate accuracy: UDP (1472-byte payload) at 1.2x the link rate, pfifo limit 100, 1 ms"
    );
        println!("(own paced sender and receiver; delivered rate = least-squares slope of received frame bits over arrival time, first 10% skipped)");
        println!("| link | delivered frame rate | error | received/sent | link drops | socket drops | release late p99 µs | load |");
        println!("|---|---|---|---|---|---|---|---|");
        let rates: &[(u64, f64)] = if short {
            &[(10_000_000, 1.5), (100_000_000, 1.0)]
        } else {
            &[(10_000_000, 3.0), (100_000_000, 2.0), (200_000_000, 1.5)]
        };
        for &(r, secs) in rates {
            let mut t = sojourn_core::params::Table::default();
            t.0.push((
                "kind".into(),
                sojourn_core::params::Value::Str("pfifo".into()),
            ));
            t.0.push(("limit".into(), sojourn_core::params::Value::Int(100)));
            let mut spec = LinkSpec::new(r, Duration::from_ms(1), "pfifo");
            spec.qdisc = testbed::qdisc(&sojourn_core::params::Value::Table(t));
            let stop = Arc::new(AtomicBool::new(false));
            let h = forward::spawn(tb.plan(&spec, &spec), stop.clone()).expect("forwarder");
            let t0 = forward::monotonic_ns();
            let send_ns = (secs * 1e9) as u64;
            let rx = testbed::udp_receiver(&tb.ns_b, 9000, u64::MAX, t0 + send_ns + 500_000_000)
                .expect("receiver");
            let dst = std::net::SocketAddr::from((testbed::B_ADDR, 9000));
            let sent =
                testbed::udp_send(&tb.ns_a, dst, 1472, r * 12 / 10, u64::MAX, t0 + send_ns, 0)
                    .expect("sender");
            let got = rx.join().unwrap().expect("receiver");
            stop.store(true, Ordering::Relaxed);
            let rep = h.join().expect("report");
            let l = &rep.links[0];
            let rate = slope_bps(&got, 1514);
            println!(
                "| {} Mbit/s | {:.3} Mbit/s | {:+.3}% | {}/{} | {} | {} | {:.1} | {} |",
                r / 1_000_000,
                rate / 1e6,
                100.0 * (rate - r as f64) / r as f64,
                got.len(),
                sent,
                l.dropped(),
                rep.ports.iter().map(|p| p.rx_kernel_drops).sum::<u64>(),
                l.release_late_ns.quantile(0.99).unwrap_or(0.0) / 1e3,
                load()
            );
        }
    }
}
fn slope_bps(got: &[testbed::Received], frame_bytes: u64) -> f64 {
    if got.len() < 20 {
        return 0.0;
    }
    let w = &got[got.len() / 10..];
    let bits = frame_bytes as f64 * 8.0;
    let t0 = w[0].recv_ns;
    let n = w.len() as f64;
    let xs: Vec<f64> = w.iter().map(|g| (g.recv_ns - t0) as f64 * 1e-9).collect();
    let mx = xs.iter().sum::<f64>() / n;
    let my = (n - 1.0) / 2.0 * bits;
    let mut cov = 0.0;
    let mut var = 0.0;
    for (i, x) in xs.iter().enumerate() {
        cov += (x - mx) * (i as f64 * bits - my);
        var += (x - mx) * (x - mx);
    }
    cov / var
}
