//! Congestion control against independent truths: the Mathis law, full utilisation with
//! a BDP buffer, the CUBIC window curve of RFC 9438, BBR's operating point and PROBE_RTT
//! period, fairness between identical CUBIC flows.

mod tcp_common;
use tcp_common::*;

use sojourn_sim::run_toml;

/// Reno under Bernoulli loss p: throughput ≈ MSS/RTT · √(3/(2p)) (Mathis et al. 1997).
#[test]
fn reno_follows_the_mathis_law() {
    for (p, secs) in [(0.01f64, 200), (0.001, 400)] {
        let out = run_toml(&format!(
            r#"
            duration = "{secs}s"
            warmup = "20s"
            seed = 11
            [transport]
            cc = "reno"
            [topology]
            kind = "graph"
            nodes = ["a", "b"]
            [[topology.links]]
            from = "a"
            to = "b"
            name = "wire"
            rate = "100Mbit"
            delay = "50ms"
            loss = {p}
            qdisc = {{ kind = "pfifo", limit = 10000 }}
            reverse = {{ loss = 0.0 }}
            [[workload]]
            kind = "bulk"
            from = "a"
            to = "b"
            "#
        ))
        .unwrap();
        let rtt = 0.1;
        let mathis = 1448.0 * 8.0 / rtt * (3.0 / (2.0 * p)).sqrt();
        // Goodput after warm-up: payload bytes delivered / time (wire throughput × payload share).
        let tp = f(&out.summary["links"]["wire"]["throughput_bps"]) * 1448.0 / 1514.0;
        let err = (tp - mathis) / mathis;
        eprintln!(
            "Mathis p={p}: {:.3} vs {:.3} Mbit/s",
            tp / 1e6,
            mathis / 1e6
        );
        assert!(
            err.abs() < 0.2,
            "p={p}: {:.3} Mbit/s vs Mathis {:.3} Mbit/s ({:+.1}%)",
            tp / 1e6,
            mathis / 1e6,
            err * 100.0
        );
    }
}

fn single_flow_utilisation(cc: &str) -> f64 {
    // 10 Mbit/s, RTT 40 ms: BDP = 50 kB ≈ 33 frames of 1514 B; pfifo of 34 packets.
    let out = run_toml(&format!(
        r#"
        duration = "70s"
        warmup = "10s"
        [transport]
        cc = "{cc}"
        [topology]
        kind = "dumbbell"
        pairs = 1
        bottleneck = {{ rate = "10Mbit", delay = "20ms", qdisc = {{ kind = "pfifo", limit = 34 }} }}
        [[workload]]
        kind = "bulk"
        pair = 0
        "#
    ))
    .unwrap();
    f(&out.summary["links"]["bottleneck"]["utilisation"])
}

#[test]
fn one_flow_fills_the_link_with_a_bdp_buffer() {
    for cc in ["reno", "cubic"] {
        let u = single_flow_utilisation(cc);
        eprintln!("{cc}: utilisation {u:.4}");
        assert!(u >= 0.98, "{cc}: utilisation {u:.4}");
    }
}

/// RFC 9438 §4.2: after a loss, W(t) = C·(t − K)³ + W_max, K = ∛(W_max(1 − β)/C).
#[test]
fn cubic_window_follows_the_cubic_curve() {
    // 20 Mbit/s, RTT 100 ms: BDP ≈ 173 packets, buffer 100: losses near W_max ≈ 270, where
    // CUBIC is in its cubic (not Reno-friendly) region.
    let out = run_toml(
        r#"
        duration = "40s"
        [transport]
        cc = "cubic"
        [topology]
        kind = "dumbbell"
        pairs = 1
        bottleneck = { rate = "20Mbit", delay = "50ms", qdisc = { kind = "pfifo", limit = 100 } }
        [[workload]]
        kind = "bulk"
        pair = 0
        [record]
        interval = "10ms"
        flows = true
        "#,
    )
    .unwrap();
    let cwnd = series(&out, "flow0", "cwnd_bytes");
    let ssth = series(&out, "flow0", "ssthresh_bytes");
    let wmax = series(&out, "flow0", "cubic_wmax_pkts");
    assert!(!cwnd.is_empty() && !ssth.is_empty());
    let at = |s: &[(f64, f64)], t: f64| s.iter().find(|x| x.0 >= t - 1e-9).map(|x| x.1);
    // Reductions = changes of ssthresh; take the first one after slow start has settled.
    let mut reductions = Vec::new();
    for w in ssth.windows(2) {
        if w[1].1 < w[0].1 - 1.0 {
            reductions.push(w[1].0);
        }
    }
    let t_red = *reductions
        .iter()
        .find(|&&t| t > 5.0)
        .expect("a loss after 5 s");
    let next_red = reductions.iter().find(|&&t| t > t_red + 0.5).copied();
    let ss_pkts = at(&ssth, t_red + 0.5).unwrap() / 1448.0;
    let w_max = at(&wmax, t_red + 0.5).unwrap();
    // The epoch starts when recovery ends: the first sample with cwnd back at ssthresh.
    let t0 = cwnd
        .iter()
        .find(|x| x.0 > t_red && (x.1 / 1448.0 - ss_pkts).abs() < 1.0)
        .map(|x| x.0)
        .expect("recovery ends");
    let c = 0.4;
    let k = ((w_max - ss_pkts) / c).cbrt();
    // β = 0.7 (RFC 9438 §4.6): ssthresh is 0.7 × the window at the loss. W_max is that
    // window, or 0.85 × it with fast convergence (§4.7: a loss below the previous W_max).
    let cwnd_at_loss = cwnd
        .iter()
        .filter(|x| x.0 < t_red && x.0 > t_red - 0.3)
        .map(|x| x.1 / 1448.0)
        .fold(0.0, f64::max);
    let beta = ss_pkts / cwnd_at_loss;
    assert!(
        (0.68..=0.72).contains(&beta),
        "β {beta}: ssthresh {ss_pkts} after a loss at cwnd {cwnd_at_loss}"
    );
    let wmax_before = at(&wmax, t_red - 0.3).unwrap_or(0.0);
    let want = if cwnd_at_loss < wmax_before {
        0.85
    } else {
        1.0
    };
    let ratio = w_max / cwnd_at_loss;
    assert!(
        (ratio - want).abs() < 0.02,
        "W_max {w_max} = {ratio:.3} × cwnd at loss {cwnd_at_loss}, expected {want} (previous W_max {wmax_before})"
    );
    let mut checked = 0;
    for &(t, v) in &cwnd {
        let dt = t - t0;
        if dt < 0.3 || dt > 1.3 * k || next_red.is_some_and(|r| t >= r - 0.2) {
            continue;
        }
        let w = c * (dt - k).powi(3) + w_max;
        let got = v / 1448.0;
        assert!(
            (got - w).abs() / w < 0.05,
            "t0+{dt:.2}s: cwnd {got:.1} vs W(t) {w:.1} (W_max {w_max}, K {k:.2})"
        );
        checked += 1;
    }
    eprintln!("cubic: W_max {w_max} ssthresh {ss_pkts:.1} K {k:.2} t0 {t0:.2}, {checked} samples");
    assert!(checked > 100, "only {checked} samples in the cubic region");
}

#[test]
fn bbr_keeps_the_pipe_full_with_little_queue() {
    let out = run_toml(
        r#"
        duration = "35s"
        warmup = "3s"
        [transport]
        cc = "bbr"
        [topology]
        kind = "dumbbell"
        pairs = 1
        bottleneck = { rate = "50Mbit", delay = "10ms", qdisc = { kind = "pfifo", limit = 1000 } }
        [[workload]]
        kind = "bulk"
        pair = 0
        [record]
        interval = "10ms"
        flows = true
        "#,
    )
    .unwrap();
    let b = &out.summary["links"]["bottleneck"];
    let u = f(&b["utilisation"]);
    assert!(u >= 0.95, "utilisation {u:.4}");
    let base_rtt_ms = 20.0;
    let p50 = f(&b["sojourn_ms"]["p50"]);
    assert!(p50 < 0.5 * base_rtt_ms, "median queueing delay {p50} ms");
    // PROBE_RTT: cwnd drops to 4 packets about every 10 s (min-RTT filter expiry).
    let cwnd = series(&out, "flow0", "cwnd_bytes");
    let mut dips = Vec::new();
    let mut inside = false;
    for &(t, v) in &cwnd {
        if v <= 4.0 * 1448.0 && t > 1.0 {
            if !inside {
                dips.push(t);
            }
            inside = true;
        } else {
            inside = false;
        }
    }
    eprintln!("bbr: utilisation {u:.4} p50 {p50} ms probe_rtt at {dips:?}");
    assert!(dips.len() >= 3, "PROBE_RTT episodes at {dips:?}");
    for w in dips.windows(2) {
        let gap = w[1] - w[0];
        assert!(
            (9.5..11.5).contains(&gap),
            "PROBE_RTT spacing {gap:.2} s ({dips:?})"
        );
    }
}

/// Four identical CUBIC flows (same RTT, same start) share a drop-tail bottleneck evenly
/// over a long run. CUBIC converges slowly under synchronised drop-tail losses (a flow can
/// hold 2-3× another's rate for tens of seconds), so the run is 300 s. The bars fail when
/// one flow gets half another's rate: four flows [1, ½, ¾, ¾] give Jain 0.947, [1, 1, 1, ½]
/// give 0.942, and max/min is 2. They are not tighter because one deterministic run is one
/// trajectory of a chaotic system: the same set-up with buffers of 60, 63, 67, 70, 74, 80, 90
/// and 100 packets gave Jain 0.964–0.998 and max/min 1.08–1.70 before the PRR fix (session 7),
/// 0.976–0.999 and 1.08–1.45 after it (67 packets: 0.993 / 1.23 before, 0.976 / 1.45 after).
#[test]
fn four_cubic_flows_share_fairly() {
    let out = run_toml(
        r#"
        duration = "300s"
        seed = 5
        [transport]
        cc = "cubic"
        [topology]
        kind = "dumbbell"
        pairs = 4
        bottleneck = { rate = "20Mbit", delay = "20ms", qdisc = { kind = "pfifo", limit = 67 } }
        [[workload]]
        kind = "bulk"
        pairs = "all"
        "#,
    )
    .unwrap();
    let bytes: Vec<f64> = col_u64(&out.flows, "delivered_bytes")
        .iter()
        .map(|&b| b as f64)
        .collect();
    assert_eq!(bytes.len(), 4);
    let j = jain(&bytes);
    let spread =
        bytes.iter().cloned().fold(0.0, f64::max) / bytes.iter().cloned().fold(f64::MAX, f64::min);
    eprintln!("jain {j:.4} max/min {spread:.3} {bytes:?}");
    assert!(j >= 0.95, "Jain index {j:.3} for {bytes:?}");
    assert!(spread < 2.0, "max/min {spread:.3} for {bytes:?}");
    let u = f(&out.summary["links"]["bottleneck"]["utilisation"]);
    assert!(u > 0.9, "utilisation {u}");
}

/// RFC 3168 with a marking AQM: no loss, no retransmission, and the window is reduced in
/// response to marks (ssthresh becomes finite, cwnd stays near the marking point).
#[test]
fn ecn_flow_reduces_on_marks_without_retransmitting() {
    for cc in ["cubic", "reno"] {
        let out = run_toml(&format!(
            r#"
            duration = "40s"
            warmup = "5s"
            [transport]
            cc = "{cc}"
            ecn = true
            [topology]
            kind = "dumbbell"
            pairs = 1
            bottleneck = {{ rate = "10Mbit", delay = "20ms", qdisc = {{ kind = "codel", ecn = true }} }}
            [[workload]]
            kind = "bulk"
            pair = 0
            [record]
            interval = "50ms"
            flows = true
            "#
        ))
        .unwrap();
        let b = &out.summary["links"]["bottleneck"];
        let marks = f(&b["ecn_marks"]);
        assert!(marks > 10.0, "{cc}: {marks} marks");
        assert_eq!(
            f(&b["drops_total"]),
            0.0,
            "{cc}: a marking queue drops nothing"
        );
        assert_eq!(col_u64(&out.flows, "retransmits")[0], 0, "{cc}");
        assert_eq!(col_u64(&out.flows, "rtos")[0], 0, "{cc}");
        // CoDel's 5 ms target is well below this path's BDP, so the link is not kept
        // full after each reduction; just check the flow is not starved.
        let u = f(&b["utilisation"]);
        assert!(u > 0.6, "{cc}: utilisation {u}");
        // Reductions: ssthresh must have been set by marks, and cwnd must stay bounded
        // near the BDP (≈ 35 packets) instead of growing without limit.
        let ssth = series(&out, "flow0", "ssthresh_bytes");
        assert!(!ssth.is_empty(), "{cc}: no window reduction");
        let cwnd = series(&out, "flow0", "cwnd_bytes");
        let max_late = cwnd
            .iter()
            .filter(|x| x.0 > 10.0)
            .map(|x| x.1 / 1448.0)
            .fold(0.0, f64::max);
        assert!(max_late < 80.0, "{cc}: cwnd reached {max_late} packets");
        let p50 = f(&b["sojourn_ms"]["p50"]);
        assert!(p50 < 10.0, "{cc}: median sojourn {p50} ms");
    }
}

/// Vegas keeps between α = 2 and β = 4 packets queued at the bottleneck (Brakmo &
/// Peterson): at 10 Mbit/s one 1514-B packet is 1.21 ms, so the mean sojourn stays within
/// β packets plus one delayed-ACK burst (5 packet times) while the link stays busy.
#[test]
fn vegas_keeps_alpha_to_beta_packets_queued() {
    let out = run_toml(
        r#"
        duration = "60s"
        warmup = "10s"
        [transport]
        cc = "vegas"
        [topology]
        kind = "dumbbell"
        pairs = 1
        bottleneck = { rate = "10Mbit", delay = "20ms", qdisc = { kind = "pfifo", limit = 1000 } }
        [[workload]]
        kind = "bulk"
        pair = 0
        "#,
    )
    .unwrap();
    let b = &out.summary["links"]["bottleneck"];
    let pkt_ms = 1514.0 * 8.0 / 10e6 * 1e3;
    let mean = f(&b["sojourn_ms"]["mean"]);
    eprintln!(
        "vegas: mean sojourn {mean} ms ({:.2} packets)",
        mean / pkt_ms
    );
    assert!(
        mean / pkt_ms <= 5.0,
        "mean queue {:.2} packets",
        mean / pkt_ms
    );
    assert_eq!(f(&b["drops_total"]), 0.0);
    let u = f(&b["utilisation"]);
    assert!(u > 0.95, "utilisation {u}");
}

/// HyStart (Ha & Rhee 2011, Linux `tcp_cubic`): with a deep buffer, CUBIC leaves slow
/// start when the RTT rises by clamp(min RTT/8, 4 ms, 16 ms) — a few packets of queue —
/// instead of filling the buffer, while Reno's slow start overflows it.
#[test]
fn hystart_ends_slow_start_before_the_buffer_overflows() {
    let run = |cc: &str| {
        let out = run_toml(&format!(
            r#"
            duration = "6s"
            [transport]
            cc = "{cc}"
            [topology]
            kind = "dumbbell"
            pairs = 1
            bottleneck = {{ rate = "10Mbit", delay = "20ms", qdisc = {{ kind = "pfifo", limit = 400 }} }}
            [[workload]]
            kind = "bulk"
            pair = 0
            [record]
            interval = "10ms"
            flows = true
            "#
        ))
        .unwrap();
        let drops = f(&out.summary["links"]["bottleneck"]["drops_total"]);
        let ssth = series(&out, "flow0", "ssthresh_bytes");
        (drops, ssth.first().map(|x| (x.0, x.1 / 1448.0)))
    };
    let (cubic_drops, exit) = run("cubic");
    let (reno_drops, _) = run("reno");
    let (t, w) = exit.expect("CUBIC left slow start");
    eprintln!(
        "hystart exit at {t} s with {w} packets; drops cubic {cubic_drops} reno {reno_drops}"
    );
    assert_eq!(cubic_drops, 0.0);
    assert!(reno_drops > 50.0, "Reno overflows the buffer in slow start");
    // BDP ≈ 35 packets, overflow at BDP + 400. The delay threshold (5 ms ≈ 4 packets of
    // queue) is crossed in the round after cwnd passes the BDP; the round's minimum RTT
    // needs 8 samples taken from the round's start, and rounds are counted from the
    // connection's first ACK (Linux 6.14+), so detection lags by up to two rounds in
    // which cwnd doubles (the kernel commit reports the same later exit).
    assert!((35.0..=5.0 * 35.0).contains(&w), "exit window {w}");
}

/// DCTCP (and Prague's DCTCP-like core) against a step-marking queue with the threshold K
/// above C·RTT/7 fills the link (Alizadeh et al., "DCTCP", SIGCOMM 2010, §3.3: full
/// throughput for K > C·RTT/7), with the queue held near K — no loss, the maximum sojourn
/// within K + 1 ms — where a loss-based flow would fill the buffer. 100 Mbit/s, 10 ms RTT
/// (C·RTT = 83 packets, /7 = 12), K = 2 ms = 16.5 packets: DualPI2's step AQM (its PI
/// stays at 0 far below the 15-ms target). DCTCP sends ECT(0) (`any_ect`), Prague ECT(1);
/// with classic feedback (DCTCP's echo) and with Accurate ECN (RFC 9768). Prague, paced at
/// 100 %, fills the link without reaching the step.
#[test]
fn dctcp_and_prague_fill_the_link_with_a_queue_near_the_step_threshold() {
    for (cc, mask, ecn) in [
        ("dctcp", "any_ect", "true"),
        ("prague", "l4s_ect", "true"),
        ("dctcp", "any_ect", "\"accecn\""),
        ("prague", "l4s_ect", "\"accecn\""),
    ] {
        let out = run_toml(&format!(
            r#"
            duration = "20s"
            warmup = "5s"
            seed = 3
            [transport]
            cc = "{cc}"
            ecn = {ecn}
            [topology]
            kind = "graph"
            nodes = ["a", "b"]
            [[topology.links]]
            from = "a"
            to = "b"
            name = "wire"
            rate = "100Mbit"
            delay = "5ms"
            qdisc = {{ kind = "dualpi2", ecn_mask = "{mask}", step_thresh = "2ms" }}
            [[workload]]
            kind = "bulk"
            from = "a"
            to = "b"
            "#
        ))
        .unwrap();
        let w = &out.summary["links"]["wire"];
        let util = f(&w["utilisation"]);
        let max_ms = f(&w["sojourn_ms"]["max"]);
        eprintln!("{cc} ecn {ecn}: utilisation {util:.4}, max sojourn {max_ms:.3} ms");
        assert!(util > 0.95, "{cc}: utilisation {util}");
        assert!(max_ms < 3.0, "{cc}: max sojourn {max_ms} ms");
        assert_eq!(f(&w["drops_total"]), 0.0, "{cc}: drops");
        if cc == "dctcp" {
            assert!(
                f(&w["ecn_marks"]) > 1000.0,
                "{cc}: the step must be marking"
            );
        } else {
            // Prague paces at 100 % of cwnd per SRTT (tcp_prague): once the link is full
            // it is no longer cwnd-limited (tcp_is_cwnd_limited), so it stops growing with
            // its queue below the 2-ms step — the pacing, not the marks, holds it.
            assert!(
                max_ms < 2.0,
                "{cc}: max sojourn {max_ms} ms at or above the step"
            );
        }
    }
}
