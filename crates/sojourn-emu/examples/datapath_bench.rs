//! Datapath benchmark (root; reports, never asserts): forwarder throughput with MTU frames
//! (TCP through the forwarder with iperf3, one stream, CUBIC) for pfifo and fq_codel, CPU
//! time per packet, and delivered-rate accuracy with UDP at 1.2x the link rate.
//!
//! ```sh
//! cargo run --release -p sojourn-emu --example datapath_bench            # full
//! cargo run --release -p sojourn-emu --example datapath_bench -- --short # 2 s runs
//! ```
//! Needs `iperf3` (Debian package `iperf3`). The machine is shared: the load average is
//! printed with the numbers.

use serde_json::Value as Json;
use sojourn_core::Duration;
use sojourn_emu::forward::{self, ForwarderReport};
use sojourn_emu::testbed::{self, LinkSpec, Testbed};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Runs iperf3 a→b through a forwarder with link `spec` both ways; returns the client's
/// JSON and the forwarder's report.
fn iperf(tb: &Testbed, spec: &LinkSpec, args: &[&str]) -> (Json, ForwarderReport) {
    let stop = Arc::new(AtomicBool::new(false));
    let h = forward::spawn(tb.plan(spec, spec), stop.clone()).expect("forwarder");
    let mut server = Command::new("ip")
        .args([
            "netns", "exec", &tb.ns_b, "iperf3", "-s", "-1", "-p", "5201",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server (is iperf3 installed?)");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut cmd = vec![
        "netns", "exec", &tb.ns_a, "iperf3", "-c", "10.0.2.1", "-p", "5201", "-J",
    ];
    cmd.extend_from_slice(args);
    let out = Command::new("ip")
        .args(&cmd)
        .output()
        .expect("iperf3 client");
    let _ = server.wait();
    stop.store(true, Ordering::Relaxed);
    let rep = h.join().expect("report");
    let j: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
    (j, rep)
}

fn frames(rep: &ForwarderReport) -> u64 {
    rep.ports.iter().map(|p| p.rx_frames).sum()
}

fn main() {
    let short = std::env::args().any(|a| a == "--short");
    let secs = if short { "2" } else { "5" };
    if let Err(why) = sojourn_emu::netns::check_available() {
        println!("skipped: {why}");
        return;
    }
    let tb = Testbed::new(1500).expect("testbed");
    println!("load average at start: {}", load());
    println!("\n# TCP throughput, one CUBIC stream, MTU frames (GSO/TSO/GRO off), link 40 Gbit/s, 1 ms each way");
    println!("| qdisc | goodput Gbit/s | frames/s | forwarder CPU ns/frame | CPU share | retransmits | socket drops | tx errors | load |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for q in ["pfifo", "fq_codel"] {
        let spec = LinkSpec::new(40_000_000_000, Duration::from_ms(1), q);
        let (j, rep) = iperf(&tb, &spec, &["-t", secs, "-C", "cubic"]);
        let gbps = j["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0)
            / 1e9;
        let retr = j["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
        let n = frames(&rep);
        let dur = rep.duration_ns as f64 * 1e-9;
        println!(
            "| {q} | {gbps:.2} | {:.0} | {:.0} | {:.0}% | {retr} | {} | {} | {} |",
            n as f64 / dur,
            rep.cpu_ns as f64 / n.max(1) as f64,
            100.0 * rep.cpu_ns as f64 / rep.duration_ns as f64,
            rep.ports.iter().map(|p| p.rx_kernel_drops).sum::<u64>(),
            rep.ports.iter().map(|p| p.tx_errors).sum::<u64>(),
            load()
        );
        if rep.check_conservation().is_err() || rep.error.is_some() {
            println!(
                "  (conservation {:?}, error {:?})",
                rep.check_conservation(),
                rep.error
            );
        }
    }
    println!("\n# TCP throughput with GSO buffers (hosts' offloads on, PACKET_VNET_HDR), link 40 Gbit/s, 1 ms");
    println!("| qdisc | goodput Gbit/s | buffers/s | forwarder CPU ns/buffer | CPU share | retransmits | load |");
    println!("|---|---|---|---|---|---|---|");
    {
        let tbg = Testbed::with_gso(1500, true).expect("testbed");
        for q in ["pfifo", "fq_codel"] {
            let spec = LinkSpec::new(40_000_000_000, Duration::from_ms(1), q);
            let (j, rep) = iperf(&tbg, &spec, &["-t", secs, "-C", "cubic"]);
            let gbps = j["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0)
                / 1e9;
            let retr = j["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
            let n = frames(&rep);
            println!(
                "| {q} | {gbps:.2} | {:.0} | {:.0} | {:.0}% | {retr} | {} |",
                n as f64 / (rep.duration_ns as f64 * 1e-9),
                rep.cpu_ns as f64 / n.max(1) as f64,
                100.0 * rep.cpu_ns as f64 / rep.duration_ns as f64,
                load()
            );
            if rep.check_conservation().is_err()
                || rep.error.is_some()
                || rep.ingress_drops.oversize > 0
            {
                println!(
                    "  (conservation {:?}, error {:?}, ingress {:?})",
                    rep.check_conservation(),
                    rep.error,
                    rep.ingress_drops
                );
            }
        }
    }
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
        let (j, rep) = iperf(&tb, &spec, &["-t", secs, "-C", "cubic"]);
        let bps = j["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
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
        spec.qdisc = sojourn_core::params::Value::Table(t);
        let stop = Arc::new(AtomicBool::new(false));
        let h = forward::spawn(tb.plan(&spec, &spec), stop.clone()).expect("forwarder");
        let t0 = forward::monotonic_ns();
        let send_ns = (secs * 1e9) as u64;
        let rx = testbed::udp_receiver(&tb.ns_b, 9000, u64::MAX, t0 + send_ns + 500_000_000)
            .expect("receiver");
        let dst = std::net::SocketAddr::from((testbed::B_ADDR, 9000));
        let sent = testbed::udp_send(&tb.ns_a, dst, 1472, r * 12 / 10, u64::MAX, t0 + send_ns, 0)
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
