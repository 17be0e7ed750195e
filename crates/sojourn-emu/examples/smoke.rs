use sojourn_core::Duration;
use sojourn_emu::forward::{self, monotonic_ns};
use sojourn_emu::testbed::{self, LinkSpec, Testbed};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rate: u64 = args
        .get(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(10_000_000);
    let delay_ms: u64 = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(5);
    let offered: f64 = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(1.2);
    let secs: u64 = args.get(4).map(|s| s.parse().unwrap()).unwrap_or(2);
    let tb = Testbed::new(1500).unwrap();
    let spec = LinkSpec::new(rate, Duration::from_ms(delay_ms), "pfifo");
    let stop = Arc::new(AtomicBool::new(false));
    let h = forward::spawn(tb.plan(&spec, &spec), stop.clone()).unwrap();
    let t0 = monotonic_ns();
    let rx =
        testbed::udp_receiver(&tb.ns_b, 9000, u64::MAX, t0 + (secs + 1) * 1_000_000_000).unwrap();
    let sent = testbed::udp_send(
        &tb.ns_a,
        "10.0.2.1:9000".parse().unwrap(),
        1472,
        (rate as f64 * offered) as u64,
        u64::MAX,
        t0 + secs * 1_000_000_000,
    )
    .unwrap();
    let got = rx.join().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    let r = h.join().unwrap();
    let n = got.len();
    println!("sent {sent} got {n}");
    if n > 10 {
        let a = &got[n / 10];
        let b = &got[n - 1];
        let rate_meas = (b.bytes as f64 + 42.0) * 8.0 * (n - 1 - n / 10) as f64
            / ((b.recv_ns - a.recv_ns) as f64 * 1e-9);
        println!(
            "delivered frame rate {:.4} Mbit/s (link {} Mbit/s) ratio {:.5}",
            rate_meas / 1e6,
            rate / 1_000_000,
            rate_meas / rate as f64
        );
        let owd: Vec<f64> = got
            .iter()
            .take(5)
            .map(|g| (g.recv_ns - g.sent_ns) as f64 / 1e3)
            .collect();
        println!("first owd us {:?}", owd);
    }
    for l in &r.links {
        println!(
            "{} rx {} deliv {} drops {:?} q {} late mean {:.0} p99 {:?} max {:?}",
            l.name,
            l.received_pkts,
            l.delivered_pkts,
            l.drops,
            l.queued_at_end,
            l.release_late_ns.mean(),
            l.release_late_ns.quantile(0.99),
            l.release_late_ns.max()
        );
    }
    println!(
        "{:?} cons {:?} cpu {} ms",
        r.ingress_drops,
        r.check_conservation(),
        r.cpu_ns / 1_000_000
    );
}
